// Fuzzes the rendezvous protocol decoder (collectives/rendezvous/protocol.h): any bytes are
// either a Request/Response or an IoError, never a crash, a hang or another exception; what
// decodes encodes and decodes again to the same message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "collectives/rendezvous/protocol.h"
#include "common/error.h"

using namespace hvd::rendezvous::protocol;

namespace {

bool sameRequest(const Request& a, const Request& b) {
  return a.op == b.op && a.keys == b.keys && a.value == b.value && a.delta == b.delta &&
         a.timeoutMs == b.timeoutMs;
}

bool sameResponse(const Response& a, const Response& b) {
  return a.ok == b.ok && a.found == b.found && a.value == b.value && a.counter == b.counter &&
         a.missing == b.missing && a.error == b.error;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  try {
    Request r = decodeRequest(bytes, "fuzz-peer");
    if (!sameRequest(r, decodeRequest(encode(r), "fuzz-peer"))) abort();
  } catch (const hvd::IoError&) {}
  try {
    Response r = decodeResponse(bytes, "fuzz-peer");
    if (!sameResponse(r, decodeResponse(encode(r), "fuzz-peer"))) abort();
  } catch (const hvd::IoError&) {}
  return 0;
}
