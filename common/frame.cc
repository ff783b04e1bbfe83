#include "common/frame.h"

#include "common/error.h"

namespace hvd::frame {

Header encodeHeader(std::size_t payloadBytes) {
  if (payloadBytes > kMaxFrameBytes)
    throw InvalidArgument(detail::concat("frame of ", payloadBytes, " bytes exceeds the cap of ",
                                         kMaxFrameBytes, " bytes"));
  auto n = static_cast<uint32_t>(payloadBytes);
  return {static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(n >> 16),
          static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)};
}

std::size_t decodeHeader(const Header& h, const std::string& peer) {
  std::size_t n = (std::size_t{h[0]} << 24) | (std::size_t{h[1]} << 16) | (std::size_t{h[2]} << 8) |
                  std::size_t{h[3]};
  if (n > kMaxFrameBytes)
    throw IoError(detail::concat("frame from ", peer, " announces ", n, " bytes, above the cap of ",
                                 kMaxFrameBytes, " bytes: refused"));
  return n;
}

}  // namespace hvd::frame
