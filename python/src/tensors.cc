#include "python/src/tensors.h"

namespace hvd::python {
namespace {

nb::dlpack::dtype toDlpack(DType t) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code c, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1};
  };
  switch (t) {
    case DType::UInt8:
      return make(Code::UInt, 8);
    case DType::Int8:
      return make(Code::Int, 8);
    case DType::UInt16:
      return make(Code::UInt, 16);
    case DType::Int16:
      return make(Code::Int, 16);
    case DType::Int32:
      return make(Code::Int, 32);
    case DType::Int64:
      return make(Code::Int, 64);
    case DType::Float16:
      return make(Code::Float, 16);
    case DType::BFloat16:
      return make(Code::Bfloat, 16);
    case DType::Float32:
      return make(Code::Float, 32);
    case DType::Float64:
      return make(Code::Float, 64);
    case DType::Bool:
      return make(Code::Bool, 8);
  }
  throw InternalError("unknown dtype");
}

}  // namespace

std::string tensorLabel(OpType type, const std::string& name, std::size_t index,
                        std::size_t count) {
  std::string s = opTypeName(type);
  s += name.empty() ? std::string(" (unnamed)") : " \"" + name + "\"";
  if (count > 1) {
    s += ": tensor ";
    s += std::to_string(index);
  }
  return s;
}

DType toDType(const nb::dlpack::dtype& d, const std::string& label) {
  using Code = nb::dlpack::dtype_code;
  auto code = static_cast<Code>(d.code);
  if (d.lanes == 1) {
    if (code == Code::Int && d.bits == 8) return DType::Int8;
    if (code == Code::Int && d.bits == 16) return DType::Int16;
    if (code == Code::Int && d.bits == 32) return DType::Int32;
    if (code == Code::Int && d.bits == 64) return DType::Int64;
    if (code == Code::UInt && d.bits == 8) return DType::UInt8;
    if (code == Code::UInt && d.bits == 16) return DType::UInt16;
    if (code == Code::Float && d.bits == 16) return DType::Float16;
    if (code == Code::Float && d.bits == 32) return DType::Float32;
    if (code == Code::Float && d.bits == 64) return DType::Float64;
    if (code == Code::Bfloat && d.bits == 16) return DType::BFloat16;
    if (code == Code::Bool && d.bits == 8) return DType::Bool;
  }
  static const char* kCodes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string kind = d.code < 7 ? kCodes[d.code] : "code" + std::to_string(d.code);
  throw InvalidArgument(detail::concat(label, ": unsupported dtype ", kind, int(d.bits),
                                       d.lanes > 1 ? "x" + std::to_string(d.lanes) : "",
                                       " (hvd supports ", collectives::dtypeNameList(), ")"));
}

DeviceId deviceOf(int type, int id, const std::string& label) {
  if (type == nb::device::cpu::value) return DeviceId{};
  if (type == nb::device::cuda::value) return DeviceId{id};
  throw InvalidArgument(detail::concat(label, ": tensor is on DLPack device type ", type, " id ",
                                       id, "; hvd takes host (CPU) and CUDA tensors"));
}

OutputArray owningArray(runtime::OwnedBuffer owned, const std::vector<int64_t>& shape,
                        DType dtype) {
  auto* buffer = new runtime::OwnedBuffer(std::move(owned));
  nb::capsule owner(buffer, [](void* p) noexcept { delete static_cast<runtime::OwnedBuffer*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  DeviceId device = buffer->device;
  return OutputArray(buffer->bytes.get(), dims.size(), dims.data(), owner, nullptr, toDlpack(dtype),
                     device.isCpu() ? nb::device::cpu::value : nb::device::cuda::value,
                     device.isCpu() ? 0 : device.index);
}

Buffer emptyHostBuffer(const std::string& dtypeName, const std::vector<int64_t>& shape) {
  runtime::TensorMeta meta{collectives::parseDType(dtypeName), shape};
  for (int64_t d : shape)
    if (d < 0)
      throw InvalidArgument(
          detail::concat("empty: negative dimension in shape ", hvd::shapeText(shape)));
  return Buffer{owningArray(runtime::allocateHostBuffer(meta.bytes()), shape, meta.dtype),
                DeviceId{}};
}

void bindBuffer(nb::module_& m) {
  nb::class_<Buffer>(m, "Buffer")
      .def("__dlpack__", [](Buffer& b, nb::args, nb::kwargs) { return nb::cast(b.array); })
      .def("__dlpack_device__",
           [](Buffer& b) {
             if (b.device.isCpu()) return nb::make_tuple(int(nb::device::cpu::value), 0);
             return nb::make_tuple(int(nb::device::cuda::value), b.device.index);
           })
      .def_prop_ro("shape", [](Buffer& b) {
        std::vector<int64_t> shape(b.array.shape_ptr(), b.array.shape_ptr() + b.array.ndim());
        return shape;
      });
}

}  // namespace hvd::python
