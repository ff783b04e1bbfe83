#include "collectives/algorithms/dtype.h"

#include "common/error.h"

namespace hvd::collectives {

namespace {
constexpr DType kAllTypes[] = {DType::UInt8,   DType::Int8,    DType::UInt16,  DType::Int16,
                               DType::Int32,   DType::Int64,   DType::Float16, DType::BFloat16,
                               DType::Float32, DType::Float64, DType::Bool};
constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min,
                                ReduceOp::Max, ReduceOp::Product, ReduceOp::Adasum};
}  // namespace

std::size_t dtypeSize(DType t) {
  switch (t) {
    case DType::UInt8:
    case DType::Int8:
    case DType::Bool:
      return 1;
    case DType::UInt16:
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16:
      return 2;
    case DType::Int32:
    case DType::Float32:
      return 4;
    case DType::Int64:
    case DType::Float64:
      return 8;
  }
  throw InvalidArgument(detail::concat("unknown dtype code ", static_cast<int>(t)));
}

const char* dtypeName(DType t) {
  switch (t) {
    case DType::UInt8:
      return "uint8";
    case DType::Int8:
      return "int8";
    case DType::UInt16:
      return "uint16";
    case DType::Int16:
      return "int16";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Bool:
      return "bool";
  }
  return "unknown";
}

const std::vector<DType>& allDTypes() {
  static const std::vector<DType> all(std::begin(kAllTypes), std::end(kAllTypes));
  return all;
}

const std::string& dtypeNameList() {
  static const std::string list = [] {
    std::string s;
    for (DType t : kAllTypes) s += (s.empty() ? "" : ", ") + std::string(dtypeName(t));
    return s;
  }();
  return list;
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Average:
      return "average";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Product:
      return "product";
    case ReduceOp::Adasum:
      return "adasum";
  }
  return "unknown";
}

DType parseDType(const std::string& name) {
  for (DType t : kAllTypes)
    if (name == dtypeName(t)) return t;
  throw InvalidArgument("unknown dtype '" + name + "' (use one of " + dtypeNameList() + ")");
}

ReduceOp parseReduceOp(const std::string& name) {
  for (ReduceOp op : kAllOps)
    if (name == reduceOpName(op)) return op;
  throw InvalidArgument("unknown reduce op '" + name +
                        "' (use sum, average, min, max, product or adasum)");
}

}  // namespace hvd::collectives
