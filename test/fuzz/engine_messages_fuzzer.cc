// Fuzzes the engine's control messages (runtime/engine/messages.h over wire.h): the first byte
// picks RequestList or ResponseList, the rest is the message. Any bytes decode or throw
// InternalError, never read out of bounds or allocate from a length the bytes cannot back;
// what decodes re-encodes to a message that decodes to the same encoding, and the coordinator's
// descriptions of a decoded request (what a mismatch message prints) work on it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "runtime/engine/messages.h"
#include "runtime/engine/operation.h"

using namespace hvd::runtime;

namespace {

void describe(const OpRequest& r) {
  (void)r.describe();
  (void)r.key();
  (void)r.negotiated();
  (void)r.totalBytes();
  for (const auto& p : negotiatedProperties()) (void)p.format(r);
}

void requestList(const std::string& bytes) {
  RequestList l = RequestList::decode(bytes);
  std::string again = l.encode();
  if (RequestList::decode(again).encode() != again) abort();
  for (const auto& s : l.submissions)
    if (s.cacheId == 0) describe(s.request);
}

void responseList(const std::string& bytes) {
  ResponseList l = ResponseList::decode(bytes);
  std::string again = l.encode();
  if (ResponseList::decode(again).encode() != again) abort();
  for (const auto& r : l.responses)
    for (const auto& j : r.forJoined) describe(j);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] & 1)
      responseList(bytes);
    else
      requestList(bytes);
  } catch (const hvd::InternalError&) {}
  return 0;
}
