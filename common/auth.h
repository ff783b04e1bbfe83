// Mutual HMAC-SHA256 challenge-response on the job secret, used by every hvd connection (the
// rendezvous store and worker-to-worker links). Sans-I/O: these functions compute and check the
// messages; common/asio_io.h moves them over a socket.
//
// Protocol (all messages fixed-size, so nothing is allocated from peer-supplied lengths):
//   acceptor  -> connector : magic "HVD1" + nonce_a (32 bytes)
//   connector -> acceptor  : nonce_c (32) + HMAC(secret, "connector" | nonce_a | nonce_c | context)
//   acceptor  -> connector : HMAC(secret, "acceptor" | nonce_c | nonce_a | context)
// `context` binds extra claimed data (e.g. the connector's rank) into the proof.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace hvd::auth {

constexpr std::size_t kNonceBytes = 32;
constexpr std::size_t kDigestBytes = 32;
constexpr std::array<uint8_t, 4> kMagic = {'H', 'V', 'D', '1'};

using Nonce = std::array<uint8_t, kNonceBytes>;
using Digest = std::array<uint8_t, kDigestBytes>;

// Cryptographically random bytes from OpenSSL; throws InternalError if the RNG fails.
Nonce randomNonce();
// `bytes` random bytes as lowercase hex (job secrets and job ids).
std::string randomHex(std::size_t bytes);

Digest connectorProof(std::string_view secret, const Nonce& acceptorNonce,
                      const Nonce& connectorNonce, std::string_view context);
Digest acceptorProof(std::string_view secret, const Nonce& acceptorNonce,
                     const Nonce& connectorNonce, std::string_view context);

// Constant-time comparison.
bool digestsEqual(const Digest& a, const Digest& b);

}  // namespace hvd::auth
