#include <catch2/catch.hpp>

#include "collectives/rendezvous/protocol.h"

using namespace hvd::rendezvous::protocol;

TEST_CASE("requests and responses round-trip through MessagePack") {
  Request r;
  r.op = Op::Wait;
  r.keys = {"a", "b"};
  r.value = {0, 1, 255};
  r.timeoutMs = 1500;
  Request back = decodeRequest(encode(r), "peer");
  CHECK(back.op == Op::Wait);
  CHECK(back.keys == r.keys);
  CHECK(back.value == r.value);
  CHECK(back.timeoutMs == 1500);

  Response s;
  s.ok = false;
  s.missing = {"x"};
  Response sb = decodeResponse(encode(s), "peer");
  CHECK_FALSE(sb.ok);
  CHECK(sb.missing == s.missing);
}

TEST_CASE("a multi-get names many keys and answers each, absent ones as absent") {
  Request r;
  r.op = Op::MultiGet;
  r.keys = {"a", "b", "c"};
  Request back = decodeRequest(encode(r), "peer");
  CHECK(back.op == Op::MultiGet);
  CHECK(back.keys == r.keys);

  Response s;
  s.values = {hvd::rendezvous::Bytes{1, 2}, std::nullopt, hvd::rendezvous::Bytes{}};
  Response sb = decodeResponse(encode(s), "peer");
  REQUIRE(sb.values.size() == 3);
  CHECK(sb.values[0] == s.values[0]);
  CHECK_FALSE(sb.values[1].has_value());
  CHECK(sb.values[2] == hvd::rendezvous::Bytes{});
}

TEST_CASE("malformed requests are rejected naming the peer") {
  std::vector<uint8_t> junk = {0xc1, 0x00, 0x13};
  REQUIRE_THROWS_WITH(decodeRequest(junk, "1.2.3.4:5"), Catch::Contains("1.2.3.4:5"));
  Request twoKeys;
  twoKeys.op = Op::Set;
  twoKeys.keys = {"a", "b"};
  REQUIRE_THROWS_WITH(decodeRequest(encode(twoKeys), "p"), Catch::Contains("wrong number of keys"));
}
