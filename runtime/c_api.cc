// The C boundary: converts exceptions to hvd_status codes. The current Runtime is the process's
// one (current_runtime.h), which the Python module shares.
#include <cstring>
#include <memory>
#include <string>

#include "common/error.h"
#include "hvd/hvd.h"
#include "runtime/current_runtime.h"

namespace {

using hvd::runtime::Runtime;
namespace current_runtime = hvd::runtime::current_runtime;

thread_local std::string tLastError;

template <typename Fn>
hvd_status guarded(Fn&& fn) {
  try {
    tLastError.clear();
    fn();
    return HVD_SUCCESS;
  } catch (const hvd::InvalidArgument& e) {
    tLastError = e.what();
    return HVD_INVALID_ARGUMENT;
  } catch (const hvd::TimeoutError& e) {
    tLastError = e.what();
    return HVD_TIMEOUT;
  } catch (const hvd::IoError& e) {
    tLastError = e.what();
    return HVD_IO_ERROR;
  } catch (const std::exception& e) {
    tLastError = e.what();
    return HVD_INTERNAL_ERROR;
  }
}

template <typename Fn>
hvd_status withRuntime(Fn&& fn) {
  std::shared_ptr<Runtime> rt = current_runtime::get();
  if (!rt) {
    tLastError = "hvd is not initialised: call hvd_init() first";
    return HVD_NOT_INITIALIZED;
  }
  return guarded([&] { fn(*rt); });
}

template <typename Getter>
hvd_status query(int* out, Getter getter) {
  if (!out) {
    tLastError = "output pointer is null";
    return HVD_INVALID_ARGUMENT;
  }
  return withRuntime([&](Runtime& rt) { *out = getter(rt.topology()); });
}

// The value a C caller passed for an enum parameter, read from its bytes. A C enum is an int
// and may hold any value, but C++ may assume an enum without a fixed underlying type holds only
// its enumerators' range (UBSan's -fsanitize=enum), so a bad code is never loaded as the enum:
// the parameters are taken by reference and read here.
template <typename Enum>
int rawCode(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int));
  int code;
  std::memcpy(&code, &e, sizeof code);
  return code;
}

// A switch, not a cast: the C codes are ABI and stay fixed while the internal enum may change.
hvd::collectives::DType toDType(const hvd_dtype& d) {
  using hvd::collectives::DType;
  switch (rawCode(d)) {
    case HVD_UINT8:
      return DType::UInt8;
    case HVD_INT8:
      return DType::Int8;
    case HVD_INT16:
      return DType::Int16;
    case HVD_INT32:
      return DType::Int32;
    case HVD_INT64:
      return DType::Int64;
    case HVD_FLOAT16:
      return DType::Float16;
    case HVD_BFLOAT16:
      return DType::BFloat16;
    case HVD_FLOAT32:
      return DType::Float32;
    case HVD_FLOAT64:
      return DType::Float64;
    case HVD_BOOL:
      return DType::Bool;
    case HVD_UINT16:
      return DType::UInt16;
  }
  throw hvd::InvalidArgument(hvd::detail::concat("invalid hvd_dtype ", rawCode(d)));
}

hvd::collectives::ReduceOp toOp(const hvd_reduce_op& op) {
  int code = rawCode(op);
  if (code < HVD_SUM || code > HVD_ADASUM)
    throw hvd::InvalidArgument(hvd::detail::concat("invalid hvd_reduce_op ", code));
  return static_cast<hvd::collectives::ReduceOp>(code);
}

}  // namespace

extern "C" {

hvd_status hvd_init(void) {
  return guarded([] { current_runtime::init(hvd::runtime::Config::fromEnvironment); });
}

// The runtime goes away even when the collective shutdown fails, which is then reported.
hvd_status hvd_shutdown(void) {
  return guarded([] { current_runtime::shutdown(); });
}

hvd_status hvd_is_initialized(int* out) {
  if (!out) return HVD_INVALID_ARGUMENT;
  *out = current_runtime::get() ? 1 : 0;
  return HVD_SUCCESS;
}

hvd_status hvd_rank(int* out) {
  return query(out, [](auto& t) { return t.rank; });
}
hvd_status hvd_size(int* out) {
  return query(out, [](auto& t) { return t.size; });
}
hvd_status hvd_local_rank(int* out) {
  return query(out, [](auto& t) { return t.localRank; });
}
hvd_status hvd_local_size(int* out) {
  return query(out, [](auto& t) { return t.localSize; });
}
hvd_status hvd_cross_rank(int* out) {
  return query(out, [](auto& t) { return t.crossRank; });
}
hvd_status hvd_cross_size(int* out) {
  return query(out, [](auto& t) { return t.crossSize; });
}

hvd_status hvd_allreduce(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype,
                         hvd_reduce_op op) {
  return withRuntime([&](Runtime& rt) {
    if (count > 0 && (!sendbuf || !recvbuf))
      throw hvd::InvalidArgument("hvd_allreduce: null buffer for " + std::to_string(count) +
                                 " elements");
    auto t = toDType(dtype);
    std::vector<int64_t> shape = {static_cast<int64_t>(count)};
    rt.allreduce({const_cast<void*>(sendbuf), t, shape}, {recvbuf, t, shape}, toOp(op));
  });
}

hvd_status hvd_broadcast(void* buf, size_t count, hvd_dtype dtype, int root) {
  return withRuntime([&](Runtime& rt) {
    if (count > 0 && !buf)
      throw hvd::InvalidArgument("hvd_broadcast: null buffer for " + std::to_string(count) +
                                 " elements");
    rt.broadcast({buf, toDType(dtype), {static_cast<int64_t>(count)}}, root);
  });
}

hvd_status hvd_barrier(void) {
  return withRuntime([](Runtime& rt) { rt.barrier(); });
}

const char* hvd_last_error(void) { return tLastError.c_str(); }

const char* hvd_status_string(hvd_status status) {
  switch (status) {
    case HVD_SUCCESS:
      return "success";
    case HVD_INVALID_ARGUMENT:
      return "invalid argument";
    case HVD_IO_ERROR:
      return "I/O error";
    case HVD_TIMEOUT:
      return "timeout";
    case HVD_INTERNAL_ERROR:
      return "internal error";
    case HVD_NOT_INITIALIZED:
      return "not initialised";
  }
  return "unknown status";
}

}  // extern "C"
