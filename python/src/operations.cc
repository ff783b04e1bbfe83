#include "python/src/operations.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "python/src/tensors.h"
#include "runtime/current_runtime.h"

namespace hvd::python {
namespace {

PyObject* gInternalError = nullptr;  // hvd._core.HorovodInternalError
PyObject* gRejectedError = nullptr;  // hvd._core.OperationRejectedError, a HorovodInternalError

// A Python-side handle: the engine's handle plus the arrays it reads and writes, kept alive
// until the operation completes.
class PyHandle {
 public:
  PyHandle(runtime::Handle handle, std::vector<InputArray> inputs, std::vector<OutputArray> outputs,
           std::chrono::milliseconds timeout)
      : handle_(std::move(handle)),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        timeout_(timeout) {}

  PyHandle(PyHandle&&) noexcept = default;  // leaves the moved-from handle empty
  PyHandle(const PyHandle&) = delete;
  PyHandle& operator=(const PyHandle&) = delete;

  // Dropping a handle before its operation finished must not free memory the engine still
  // writes: wait for it (the engine finishes or fails every operation within the op timeout).
  ~PyHandle() {
    if (handle_ && !handle_->poll()) {
      nb::gil_scoped_release release;
      try {
        handle_->wait(timeout_);
      } catch (...) {}
    }
  }

  bool poll() const { return handle_->poll(); }

  // Returns (outputs, received_splits, value); raises the operation's error.
  // `asNumpy` returns outputs as writable NumPy arrays (NumPy marks arrays it takes through
  // DLPack read-only); otherwise as Buffers for any framework's from_dlpack.
  nb::object wait(std::optional<double> timeoutSeconds, bool asNumpy) {
    if (result_.is_valid()) return result_;
    auto timeout = timeoutSeconds
                       ? std::chrono::milliseconds(static_cast<int64_t>(*timeoutSeconds * 1000.0))
                       : timeout_;
    runtime::OpResult* result = nullptr;
    std::string error;
    bool rejected = false;
    {
      nb::gil_scoped_release release;
      try {
        result = &handle_->wait(timeout);
      } catch (const InvalidArgument& e) {
        error = e.what();
        rejected = true;
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    // Whatever failed here failed collectively, as Horovod's synchronize raises: one base
    // type. The coordinator's rejections (a mismatch, a joined rank, a missing process set)
    // reached every rank alike and leave the engine serving; frontends map them to their
    // framework's error (TensorFlow: FailedPreconditionError, as Horovod's kernels).
    if (!result) {
      inputs_.clear();
      outputs_.clear();
      PyErr_SetString(rejected ? gRejectedError : gInternalError, error.c_str());
      throw nb::python_error();
    }
    inputs_.clear();
    outputs_.clear();
    nb::list outputs;
    for (Tensor& t : result->outputs) outputs.append(adopt(*result, t, asNumpy));
    nb::list splits;
    for (auto& s : result->receivedSplits) splits.append(nb::cast(s));
    result_ = nb::make_tuple(outputs, splits, result->value);
    return result_;
  }

  std::string description() const { return handle_->description(); }

 private:
  // Hands an engine-allocated output to Python: the array owns the buffer.
  static nb::object adopt(runtime::OpResult& result, const Tensor& t, bool asNumpy) {
    auto owned = std::find_if(result.owned.begin(), result.owned.end(),
                              [&](auto& o) { return o.bytes && o.bytes.get() == t.data; });
    if (owned == result.owned.end()) throw InternalError("an engine output has no owned buffer");
    DeviceId device = owned->device;
    OutputArray array = owningArray(std::move(*owned), t.shape, t.dtype);
    if (asNumpy && device.isCpu()) return nb::cast(nb::ndarray<nb::numpy>(array));
    return nb::cast(Buffer{std::move(array), device});
  }

  runtime::Handle handle_;
  std::vector<InputArray> inputs_;  // hold the callers' arrays until the operation completes
  std::vector<OutputArray> outputs_;
  std::chrono::milliseconds timeout_;
  nb::object result_;  // what wait() returned, for a second call
};

PyHandle enqueue(int type, const std::string& name, const std::vector<InputArray>& inputs,
                 const std::vector<OutputArray>& outputs, int reduceOp, int root, double prescale,
                 double postscale, int processSet, const std::vector<int64_t>& splits,
                 const std::vector<int32_t>& setRanks, uintptr_t stream) {
  auto rt = currentRuntime();
  if (type < 0 || type > static_cast<int>(OpType::RemoveProcessSet))
    throw InvalidArgument(detail::concat("invalid operation type ", type));
  if (reduceOp < 0 || reduceOp > static_cast<int>(runtime::ReduceOp::Adasum))
    throw InvalidArgument(detail::concat("invalid reduce op ", reduceOp));
  runtime::Operation op;
  op.type = static_cast<OpType>(type);
  op.name = name;
  op.reduceOp = static_cast<runtime::ReduceOp>(reduceOp);
  op.root = root;
  op.prescale = prescale;
  op.postscale = postscale;
  op.processSet = processSet;
  op.splits = splits;
  op.setRanks = setRanks;
  // Every tensor of one operation lives on one device: the first one's.
  auto add = [&](const auto& arrays, std::vector<Tensor>& into, const char* suffix) {
    for (std::size_t i = 0; i < arrays.size(); ++i) {
      std::string label = tensorLabel(op.type, name, i, arrays.size()) + suffix;
      DeviceId d;
      Tensor t = toTensor(arrays[i], label, d);
      if (op.inputs.empty() && op.outputs.empty())
        op.device = d;
      else if (!(d == op.device))
        throw InvalidArgument(detail::concat(label, ": tensor on ", d.describe(),
                                             ", but the operation's first tensor is on ",
                                             op.device.describe()));
      into.push_back(t);
    }
  };
  add(inputs, op.inputs, "");
  if (!outputs.empty() && outputs.size() != inputs.size())
    throw InvalidArgument(detail::concat(tensorLabel(op.type, name, 0, 1), ": ", outputs.size(),
                                         " outputs for ", inputs.size(), " inputs"));
  add(outputs, op.outputs, " output");
  op.stream = reinterpret_cast<void*>(stream);
  runtime::Handle h = rt->engine().enqueue(std::move(op));
  return PyHandle(std::move(h), inputs, outputs, rt->config().handleWaitLimit());
}

}  // namespace

std::shared_ptr<runtime::Runtime> currentRuntime() {
  auto rt = runtime::current_runtime::get();
  if (!rt) throw InvalidArgument("hvd is not initialised: call hvd.init() first");
  return rt;
}

void bindOperations(nb::module_& m) {
  gInternalError = PyErr_NewExceptionWithDoc(
      "hvd._core.HorovodInternalError",
      "A collective failed: a peer died, the network failed, the ranks disagreed on an "
      "operation, or a wait ran out. The message names the operation, tensor and ranks.",
      PyExc_RuntimeError, nullptr);
  m.attr("HorovodInternalError") = nb::handle(gInternalError);
  gRejectedError = PyErr_NewExceptionWithDoc(
      "hvd._core.OperationRejectedError",
      "Every rank's operation was refused alike, and later operations still run: the ranks "
      "disagreed on it (shape, dtype, root, op), it needed a rank that has joined, or its "
      "process set does not exist. The message names the operation and the ranks.",
      gInternalError, nullptr);
  m.attr("OperationRejectedError") = nb::handle(gRejectedError);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(gInternalError, e.what());
    }
  });

  nb::class_<PyHandle>(m, "Handle")
      .def("poll", &PyHandle::poll, "True when the operation has finished (or failed).")
      .def("wait", &PyHandle::wait, nb::arg("timeout") = nb::none(), nb::arg("as_numpy") = false,
           "Waits (GIL released) and returns (outputs, received_splits, value); raises the "
           "operation's error.")
      .def_prop_ro("description", &PyHandle::description);

  m.def("enqueue", &enqueue, nb::arg("type"), nb::arg("name"), nb::arg("inputs"),
        nb::arg("outputs"), nb::arg("reduce_op") = 0, nb::arg("root") = 0,
        nb::arg("prescale") = 1.0, nb::arg("postscale") = 1.0, nb::arg("process_set") = 0,
        nb::arg("splits") = std::vector<int64_t>{}, nb::arg("set_ranks") = std::vector<int32_t>{},
        nb::arg("stream") = 0,
        "Enqueues an operation; `stream` is the cudaStream_t (as an int) that produced CUDA "
        "tensors (0: the legacy default stream).");
  bindBuffer(m);
  m.def("empty", &emptyHostBuffer, nb::arg("dtype"), nb::arg("shape"),
        "Uninitialised host memory (64-byte aligned) for an operation's output, as a Buffer.");
}

}  // namespace hvd::python
