// Operations the engine tests submit.
#pragma once

#include <string>
#include <vector>

#include "runtime/engine/local_op.h"

namespace hvd::test {

// An in-place float32 allreduce of `v` named `name`.
inline runtime::Operation allreduceOf(const std::string& name, std::vector<float>& v) {
  runtime::Operation op;
  op.type = runtime::OpType::Allreduce;
  op.name = name;
  op.inputs = {
      collectives::Tensor{v.data(), collectives::DType::Float32, {static_cast<int64_t>(v.size())}}};
  return op;
}

// prefix followed by i ("g" 3: "g3").
// (append, not prefix + to_string: GCC 12 warns falsely of an overlapping memcpy there.)
inline std::string named(const char* prefix, int i) {
  std::string s(prefix);
  s.append(std::to_string(i));
  return s;
}

}  // namespace hvd::test
