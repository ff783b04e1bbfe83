// How error messages spell rank sets and shapes, one way everywhere: "{0,2,3}" and "[2,3]"
// (a negative dimension, one that may differ per rank, prints as "*").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hvd {

template <typename Range>
std::string rankSet(const Range& ranks) {
  std::string out = "{";
  for (auto r : ranks) {
    if (out.size() > 1) out += ",";
    out += std::to_string(r);
  }
  return out + "}";
}

inline std::string shapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += shape[i] < 0 ? std::string("*") : std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace hvd
