// The DLPack side of hvd._core: arrays from any framework (NumPy, PyTorch, TensorFlow, JAX,
// through nanobind's ndarray, without copies and without linking a framework) become the
// engine's Tensors, and outputs the engine allocated go back as arrays that own them.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/format.h"
#include "runtime/runtime.h"

namespace hvd::python {

namespace nb = nanobind;
using collectives::DType;
using collectives::Tensor;
using runtime::DeviceId;
using runtime::OpType;

using InputArray = nb::ndarray<nb::ro>;
using OutputArray = nb::ndarray<>;

// How messages name tensor `index` of `count` of an operation.
std::string tensorLabel(OpType type, const std::string& name, std::size_t index, std::size_t count);
DType toDType(const nb::dlpack::dtype& d, const std::string& label);
DeviceId deviceOf(int type, int id, const std::string& label);

// Converts one array, checking what the engine cannot see: memory layout and device.
template <typename Array>
Tensor toTensor(const Array& a, const std::string& label, DeviceId& device) {
  device = deviceOf(a.device_type(), a.device_id(), label);
  Tensor t;
  t.dtype = toDType(a.dtype(), label);
  t.shape.resize(a.ndim());
  int64_t expected = 1;
  bool contiguous = true;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    t.shape[i] = a.shape(i);
    if (a.stride_ptr() && a.shape(i) != 1 && a.stride(i) != expected) contiguous = false;
    expected *= a.shape(i);
  }
  if (!contiguous) {
    std::vector<int64_t> strides(a.stride_ptr(), a.stride_ptr() + a.ndim());
    throw InvalidArgument(detail::concat(label, ": tensor of shape ", hvd::shapeText(t.shape),
                                         " is not contiguous (strides ", hvd::shapeText(strides),
                                         "); make it contiguous first"));
  }
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  return t;
}

// An output the engine allocated, handed to any framework through the DLPack protocol
// (numpy.from_dlpack, torch.from_dlpack); it owns the memory, and the arrays made from it keep
// it alive.
struct Buffer {
  OutputArray array;
  DeviceId device;
};

// A DLPack array that owns `owned` (freed when the last array made from it goes).
OutputArray owningArray(runtime::OwnedBuffer owned, const std::vector<int64_t>& shape, DType dtype);

// Host memory for an output the caller hands to enqueue (a framework whose tensors are
// immutable, TensorFlow's, cannot provide one): aligned as the engine's own outputs,
// uninitialised.
Buffer emptyHostBuffer(const std::string& dtypeName, const std::vector<int64_t>& shape);

// hvd._core.Buffer: __dlpack__, __dlpack_device__ and shape.
void bindBuffer(nb::module_& m);

}  // namespace hvd::python
