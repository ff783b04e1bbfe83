// Element types and reduction operations of hvd's collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hvd::collectives {

// Both enums travel between ranks as their codes, which a decoder checks against the last
// enumerator: append new values at the end.
enum class DType : uint8_t {
  UInt8,
  Int8,
  UInt16,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Bool
};
// Adasum is allreduce-only and float-only (adasum.h); the elementwise reductions reject it.
enum class ReduceOp : uint8_t { Sum, Average, Min, Max, Product, Adasum };

std::size_t dtypeSize(DType t);
const char* dtypeName(DType t);
// Every dtype, in enum order, and their names joined with ", " (for messages listing them).
const std::vector<DType>& allDTypes();
const std::string& dtypeNameList();
const char* reduceOpName(ReduceOp op);
// Throw InvalidArgument naming the unknown value.
DType parseDType(const std::string& name);
ReduceOp parseReduceOp(const std::string& name);

// Calls fn(static_cast<T*>(data)) for the dtypes with a native C++ arithmetic type and returns
// true; returns false for float16, bfloat16 and bool, which the caller handles. Host code only
// (the GPU kernels' launchers use it to pick a kernel instantiation).
template <typename Fn>
bool withNativeType(void* data, DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::UInt8:
      fn(static_cast<uint8_t*>(data));
      return true;
    case DType::Int8:
      fn(static_cast<int8_t*>(data));
      return true;
    case DType::UInt16:
      fn(static_cast<uint16_t*>(data));
      return true;
    case DType::Int16:
      fn(static_cast<int16_t*>(data));
      return true;
    case DType::Int32:
      fn(static_cast<int32_t*>(data));
      return true;
    case DType::Int64:
      fn(static_cast<int64_t*>(data));
      return true;
    case DType::Float32:
      fn(static_cast<float*>(data));
      return true;
    case DType::Float64:
      fn(static_cast<double*>(data));
      return true;
    default:
      return false;
  }
}

}  // namespace hvd::collectives
