// Fuzzes the frame decoder (common/frame.h) as a peer's byte stream: a run of frames, each a
// 4-byte header and its body, the bodies decoded as rendezvous requests and responses (what the
// rendezvous server and TcpStoreClient do with them). An over-cap header must be refused from
// the header alone; a header that decodes must encode back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "collectives/rendezvous/protocol.h"
#include "common/error.h"
#include "common/frame.h"

using namespace hvd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::size_t at = 0;
  while (size - at >= frame::kHeaderBytes) {
    frame::Header header;
    std::memcpy(header.data(), data + at, header.size());
    at += header.size();
    std::size_t announced;
    try {
      announced = frame::decodeHeader(header, "fuzz-peer");
    } catch (const IoError&) {
      return 0;  // refused: the connection is dropped
    }
    if (announced > frame::kMaxFrameBytes || frame::encodeHeader(announced) != header) abort();
    if (announced > size - at) return 0;  // truncated: the reader waits for more
    std::vector<uint8_t> body(data + at, data + at + announced);
    at += announced;
    try {
      rendezvous::protocol::decodeRequest(body, "fuzz-peer");
    } catch (const IoError&) {}
    try {
      rendezvous::protocol::decodeResponse(body, "fuzz-peer");
    } catch (const IoError&) {}
  }
  return 0;
}
