// hvd._core: the engine's asynchronous API for Python. Tensors arrive as DLPack arrays through
// nanobind's ndarray (NumPy, PyTorch, TensorFlow, JAX alike, without copies and without linking
// any framework); results the engine allocates go back the same way, owned by the array.
//
// The current Runtime is the process's one, which the C API shares (runtime/current_runtime.h);
// the module keeps no Runtime of its own. The engine thread never touches Python objects, so
// waits release the GIL and cannot deadlock on it, and init and shutdown release it before
// they wait for each other.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/gpu/gpu_build.h"
#include "common/error.h"
#include "common/format.h"
#include "common/logging.h"
#include "runtime/current_runtime.h"

namespace nb = nanobind;
using namespace hvd;
using namespace hvd::runtime;
using collectives::Tensor;

namespace {

using InputArray = nb::ndarray<nb::ro>;
using OutputArray = nb::ndarray<>;

PyObject* gInternalError = nullptr;  // hvd._core.HorovodInternalError
PyObject* gRejectedError = nullptr;  // hvd._core.OperationRejectedError, a HorovodInternalError

std::shared_ptr<Runtime> current() {
  auto rt = runtime::current_runtime::get();
  if (!rt) throw InvalidArgument("hvd is not initialised: call hvd.init() first");
  return rt;
}

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

DeviceId deviceOf(int type, int id, const std::string& label) {
  if (type == nb::device::cpu::value) return DeviceId{};
  if (type == nb::device::cuda::value) return DeviceId{id};
  throw InvalidArgument(detail::concat(label, ": tensor is on DLPack device type ", type, " id ",
                                       id, "; hvd takes host (CPU) and CUDA tensors"));
}

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
OutputArray owningArray(OwnedBuffer owned, const std::vector<int64_t>& shape, DType dtype) {
  auto* buffer = new OwnedBuffer(std::move(owned));
  nb::capsule owner(buffer, [](void* p) noexcept { delete static_cast<OwnedBuffer*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  DeviceId device = buffer->device;
  return OutputArray(buffer->bytes.get(), dims.size(), dims.data(), owner, nullptr, toDlpack(dtype),
                     device.isCpu() ? nb::device::cpu::value : nb::device::cuda::value,
                     device.isCpu() ? 0 : device.index);
}

// Host memory for an output the caller hands to enqueue (a framework whose tensors are
// immutable, TensorFlow's, cannot provide one): aligned as the engine's own outputs, uninitialised.
Buffer emptyHostBuffer(const std::string& dtypeName, const std::vector<int64_t>& shape) {
  TensorMeta meta{collectives::parseDType(dtypeName), shape};
  for (int64_t d : shape)
    if (d < 0)
      throw InvalidArgument(
          detail::concat("empty: negative dimension in shape ", hvd::shapeText(shape)));
  return Buffer{owningArray(allocateHostBuffer(meta.bytes()), shape, meta.dtype), DeviceId{}};
}

// A Python-side handle: the engine's handle plus the arrays it reads and writes, kept alive
// until the operation completes.
class PyHandle {
 public:
  PyHandle(Handle handle, std::vector<InputArray> inputs, std::vector<OutputArray> outputs,
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
    OpResult* result = nullptr;
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
  static nb::object adopt(OpResult& result, const Tensor& t, bool asNumpy) {
    auto owned = std::find_if(result.owned.begin(), result.owned.end(),
                              [&](auto& o) { return o.bytes && o.bytes.get() == t.data; });
    if (owned == result.owned.end()) throw InternalError("an engine output has no owned buffer");
    DeviceId device = owned->device;
    OutputArray array = owningArray(std::move(*owned), t.shape, t.dtype);
    if (asNumpy && device.isCpu()) return nb::cast(nb::ndarray<nb::numpy>(array));
    return nb::cast(Buffer{std::move(array), device});
  }

  Handle handle_;
  std::vector<InputArray> inputs_;  // hold the callers' arrays until the operation completes
  std::vector<OutputArray> outputs_;
  std::chrono::milliseconds timeout_;
  nb::object result_;  // what wait() returned, for a second call
};

PyHandle enqueue(int type, const std::string& name, const std::vector<InputArray>& inputs,
                 const std::vector<OutputArray>& outputs, int reduceOp, int root, double prescale,
                 double postscale, int processSet, const std::vector<int64_t>& splits,
                 const std::vector<int32_t>& setRanks, uintptr_t stream) {
  auto rt = current();
  if (type < 0 || type > static_cast<int>(OpType::RemoveProcessSet))
    throw InvalidArgument(detail::concat("invalid operation type ", type));
  if (reduceOp < 0 || reduceOp > static_cast<int>(ReduceOp::Adasum))
    throw InvalidArgument(detail::concat("invalid reduce op ", reduceOp));
  Operation op;
  op.type = static_cast<OpType>(type);
  op.name = name;
  op.reduceOp = static_cast<ReduceOp>(reduceOp);
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
  Handle h = rt->engine().enqueue(std::move(op));
  return PyHandle(std::move(h), inputs, outputs, rt->config().handleWaitLimit());
}

void init(std::optional<std::vector<std::vector<int32_t>>> processSets) {
  nb::gil_scoped_release release;
  runtime::current_runtime::init([&] {
    auto config = Config::fromEnvironment();
    if (processSets) config.processSets = *processSets;
    return config;
  });
}

void shutdown() {
  nb::gil_scoped_release release;
  runtime::current_runtime::shutdown();
}

// Logs through the current Runtime's loggers (its rank's prefix), or the process's before init.
void logLine(const std::string& subsystem, spdlog::level::level_enum level,
             const std::string& text) {
  auto rt = runtime::current_runtime::get();
  log::Logs& logs = rt ? rt->logs() : log::processLogs();
  logs.get(subsystem)->log(level, "{}", text);
}

template <int Topology::*Field>
int topologyValue() {
  return current()->topology().*Field;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "hvd's runtime: the engine's asynchronous collectives on DLPack tensors";
  // A script that ends with operations in flight (a backward without its step) leaves Handles
  // in objects Python does not free at exit; nanobind's report of them ("leaked 2 instances
  // ... reference counting issue in the binding code") would read as a bug in hvd.
  nb::set_leak_warnings(false);

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

  nb::class_<PyHandle>(m, "Handle")
      .def("poll", &PyHandle::poll, "True when the operation has finished (or failed).")
      .def("wait", &PyHandle::wait, nb::arg("timeout") = nb::none(), nb::arg("as_numpy") = false,
           "Waits (GIL released) and returns (outputs, received_splits, value); raises the "
           "operation's error.")
      .def_prop_ro("description", &PyHandle::description);

  m.def("init", &init, nb::arg("process_sets") = nb::none());
  m.def("shutdown", &shutdown);
  m.def("is_initialized", [] { return runtime::current_runtime::get() != nullptr; });
  m.def("rank", &topologyValue<&Topology::rank>);
  m.def("size", &topologyValue<&Topology::size>);
  m.def("local_rank", &topologyValue<&Topology::localRank>);
  m.def("local_size", &topologyValue<&Topology::localSize>);
  m.def("cross_rank", &topologyValue<&Topology::crossRank>);
  m.def("cross_size", &topologyValue<&Topology::crossSize>);
  m.def("hostname", [] { return current()->topology().hostname; });
  m.def(
      "elastic_round", [] { return current()->elasticRound(); },
      "This elastic worker's round; -1 outside an elastic job.");
  m.def(
      "elastic_newest_round",
      [] {
        auto rt = current();
        nb::gil_scoped_release release;
        return rt->newestElasticRound();
      },
      "The newest round hvdrun has published (asks the rendezvous); -1 outside an elastic job.");
  m.def("compute_threads", [] { return current()->computeThreads(); });
  m.def(
      "cpu_share", [] { return current()->cpuShare(); },
      "The compute threads this rank's CPUs can run without sharing a core with another rank.");
  m.def(
      "elastic_commit_dir", [] { return current()->config().elasticCommitDir; },
      "HVD_ELASTIC_COMMIT_DIR: where rank 0 writes each elastic commit; empty: nowhere.");
  m.def(
      "gradient_overlap", [] { return current()->config().gradientOverlap; },
      "HVD_GRADIENT_OVERLAP: auto, on or off.");
  m.def(
      "check_replicas_every", [] { return current()->config().checkReplicasEvery; },
      "HVD_CHECK_REPLICAS: -1 off, 0 after the first update only, N also every N updates.");
  // The frontends log through the runtime's facade, so HVD_LOG_LEVEL and the rank prefix apply.
  m.def("log_info", [](const std::string& subsystem, const std::string& text) {
    logLine(subsystem, spdlog::level::info, text);
  });
  m.def("log_warn", [](const std::string& subsystem, const std::string& text) {
    logLine(subsystem, spdlog::level::warn, text);
  });
  m.def("op_timeout_seconds",
        [] { return std::chrono::duration<double>(current()->config().opTimeout).count(); });

  m.def("enqueue", &enqueue, nb::arg("type"), nb::arg("name"), nb::arg("inputs"),
        nb::arg("outputs"), nb::arg("reduce_op") = 0, nb::arg("root") = 0,
        nb::arg("prescale") = 1.0, nb::arg("postscale") = 1.0, nb::arg("process_set") = 0,
        nb::arg("splits") = std::vector<int64_t>{}, nb::arg("set_ranks") = std::vector<int32_t>{},
        nb::arg("stream") = 0,
        "Enqueues an operation; `stream` is the cudaStream_t (as an int) that produced CUDA "
        "tensors (0: the legacy default stream).");
  m.def("empty", &emptyHostBuffer, nb::arg("dtype"), nb::arg("shape"),
        "Uninitialised host memory (64-byte aligned) for an operation's output, as a Buffer.");
  m.def(
      "build_info",
      [] {
        auto b = collectives::gpu::gpuBuild(false);
        nb::dict d;
        d["cuda"] = b.cuda;
        d["nccl"] = b.nccl;
        d["cuda_version"] = b.cudaVersion;
        d["nccl_version"] = b.ncclVersion;
        d["nccl_version_code"] = b.ncclVersionCode;
        d["cuda_devices"] = static_cast<int>(b.devices.size());
        return d;
      },
      "What this build supports (CUDA, NCCL and their versions) and the CUDA devices it sees.");

  m.def(
      "process_set_ranks", [](int id) { return current()->engine().processSet(id); },
      nb::arg("id"));
  m.def("process_set_ids", [] { return current()->engine().processSetIds(); });
  m.def(
      "start_timeline",
      [](const std::string& path, bool markCycles) {
        current()->engine().startTimeline(path, markCycles);
      },
      nb::arg("path"), nb::arg("mark_cycles") = false);
  m.def("stop_timeline", [] { current()->engine().stopTimeline(); });
  m.def("stats", [] {
    EngineStats s = current()->engine().stats();
    nb::dict d;
    d["submitted"] = s.submitted;
    d["cache_hits"] = s.cacheHits;
    d["cache_misses"] = s.cacheMisses;
    d["collectives"] = s.collectives;
    d["fused_tensors"] = s.fusedTensors;
    d["inline_allreduces"] = s.inlineAllreduces;
    d["response_lists"] = s.responseLists;
    d["autotune_samples"] = s.autotuneSamples;
    return d;
  });

  nb::dict ops;
  ops["allreduce"] = static_cast<int>(OpType::Allreduce);
  ops["allgather"] = static_cast<int>(OpType::Allgather);
  ops["broadcast"] = static_cast<int>(OpType::Broadcast);
  ops["alltoall"] = static_cast<int>(OpType::Alltoall);
  ops["reducescatter"] = static_cast<int>(OpType::Reducescatter);
  ops["barrier"] = static_cast<int>(OpType::Barrier);
  ops["join"] = static_cast<int>(OpType::Join);
  ops["add_process_set"] = static_cast<int>(OpType::AddProcessSet);
  ops["remove_process_set"] = static_cast<int>(OpType::RemoveProcessSet);
  m.attr("OP_TYPES") = ops;
  nb::dict reduceOps;
  reduceOps["sum"] = static_cast<int>(ReduceOp::Sum);
  reduceOps["average"] = static_cast<int>(ReduceOp::Average);
  reduceOps["min"] = static_cast<int>(ReduceOp::Min);
  reduceOps["max"] = static_cast<int>(ReduceOp::Max);
  reduceOps["product"] = static_cast<int>(ReduceOp::Product);
  reduceOps["adasum"] = static_cast<int>(ReduceOp::Adasum);
  m.attr("REDUCE_OPS") = reduceOps;
  nb::list dtypes;
  for (DType t : collectives::allDTypes()) dtypes.append(collectives::dtypeName(t));
  m.attr("DTYPES") = nb::tuple(dtypes);
}
