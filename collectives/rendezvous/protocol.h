// The rendezvous wire protocol, used by both the launcher's server and TcpStoreClient.
// Every connection first runs the HMAC handshake of common/auth.h (context kAuthContext), then
// exchanges frames (common/frame.h) holding MessagePack maps: one Request, one Response.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives/rendezvous/store.h"

namespace hvd::rendezvous::protocol {

inline const std::string kAuthContext = "hvd-rendezvous";

enum class Op { Set, Get, Wait, Add, MultiGet };

struct Request {
  Op op = Op::Get;
  std::vector<std::string> keys;  // one key except for Wait and MultiGet
  Bytes value;                    // Set
  int64_t delta = 0;              // Add
  int64_t timeoutMs = 0;          // Wait
};

struct Response {
  bool ok = true;
  bool found = false;                        // Get
  Bytes value;                               // Get
  std::vector<std::optional<Bytes>> values;  // MultiGet: one per key, nullopt for an absent one
  int64_t counter = 0;                       // Add
  std::vector<std::string> missing;          // Wait that timed out
  std::string error;                         // !ok
};

std::vector<uint8_t> encode(const Request& r);
std::vector<uint8_t> encode(const Response& r);
// Both throw IoError naming `peer` on a malformed message.
Request decodeRequest(const std::vector<uint8_t>& bytes, const std::string& peer);
Response decodeResponse(const std::vector<uint8_t>& bytes, const std::string& peer);

}  // namespace hvd::rendezvous::protocol
