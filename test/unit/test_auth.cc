#include <catch2/catch.hpp>

#include "common/auth.h"

using namespace hvd::auth;

TEST_CASE("proofs verify only with the same secret, nonces, role and context") {
  Nonce a = randomNonce(), c = randomNonce();
  CHECK(a != c);
  Digest proof = connectorProof("secret", a, c, "ctx");
  CHECK(digestsEqual(proof, connectorProof("secret", a, c, "ctx")));
  CHECK_FALSE(digestsEqual(proof, connectorProof("Secret", a, c, "ctx")));
  CHECK_FALSE(digestsEqual(proof, connectorProof("secret", c, a, "ctx")));
  CHECK_FALSE(digestsEqual(proof, connectorProof("secret", a, c, "other")));
  CHECK_FALSE(digestsEqual(proof, acceptorProof("secret", a, c, "ctx")));
}

TEST_CASE("random hex has the requested length and varies") {
  std::string x = randomHex(32), y = randomHex(32);
  CHECK(x.size() == 64);
  CHECK(x != y);
  CHECK(x.find_first_not_of("0123456789abcdef") == std::string::npos);
}
