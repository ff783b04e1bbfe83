// Element types and reduction operations of hvd's collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hvd::collectives {

enum class DType : uint8_t {
  UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64, Bool
};
enum class ReduceOp : uint8_t { Sum, Average, Min, Max, Product };

std::size_t dtypeSize(DType t);
const char* dtypeName(DType t);
const char* reduceOpName(ReduceOp op);
// Throw InvalidArgument naming the unknown value.
DType parseDType(const std::string& name);
ReduceOp parseReduceOp(const std::string& name);

}  // namespace hvd::collectives
