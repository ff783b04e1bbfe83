#include "common/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

#include "common/error.h"

namespace hvd::auth {
namespace {

Digest hmac(std::string_view secret, std::string_view role, const Nonce& first, const Nonce& second,
            std::string_view context) {
  std::vector<uint8_t> message(role.begin(), role.end());
  message.insert(message.end(), first.begin(), first.end());
  message.insert(message.end(), second.begin(), second.end());
  message.insert(message.end(), context.begin(), context.end());
  Digest out{};
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message.data(),
            message.size(), out.data(), &length) ||
      length != kDigestBytes)
    throw InternalError("HMAC-SHA256 failed in OpenSSL");
  return out;
}

}  // namespace

Nonce randomNonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    throw InternalError("OpenSSL RAND_bytes failed: no secure random source");
  return n;
}

std::string randomHex(std::size_t bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  while (out.size() < 2 * bytes) {
    Nonce n = randomNonce();
    for (uint8_t b : n) {
      if (out.size() >= 2 * bytes) break;
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

Digest connectorProof(std::string_view secret, const Nonce& acceptorNonce,
                      const Nonce& connectorNonce, std::string_view context) {
  return hmac(secret, "connector", acceptorNonce, connectorNonce, context);
}

Digest acceptorProof(std::string_view secret, const Nonce& acceptorNonce,
                     const Nonce& connectorNonce, std::string_view context) {
  return hmac(secret, "acceptor", connectorNonce, acceptorNonce, context);
}

bool digestsEqual(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace hvd::auth
