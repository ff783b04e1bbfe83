// Views of memory that transports read from or write into. Transports never own user memory.
#pragma once

#include <cstddef>
#include <span>

namespace hvd::collectives {

using ConstBytes = std::span<const std::byte>;
using MutableBytes = std::span<std::byte>;

inline ConstBytes asBytes(const void* data, std::size_t bytes) {
  return {static_cast<const std::byte*>(data), bytes};
}
inline MutableBytes asWritableBytes(void* data, std::size_t bytes) {
  return {static_cast<std::byte*>(data), bytes};
}

}  // namespace hvd::collectives
