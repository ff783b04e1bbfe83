// Length-prefixed frames: a 4-byte big-endian payload length, then the payload. A length above
// kMaxFrameBytes is refused from the header alone, before anything is allocated.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hvd::frame {

constexpr std::size_t kHeaderBytes = 4;
constexpr std::size_t kMaxFrameBytes = 16u << 20;

using Header = std::array<uint8_t, kHeaderBytes>;

// Throws InvalidArgument if the payload exceeds kMaxFrameBytes.
Header encodeHeader(std::size_t payloadBytes);
// Throws IoError naming `peer` if the announced length exceeds kMaxFrameBytes.
std::size_t decodeHeader(const Header& header, const std::string& peer);

}  // namespace hvd::frame
