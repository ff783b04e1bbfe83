// Error hierarchy shared by every hvd component. C++ code throws these; the C API converts them to
// hvd_status codes at the boundary (runtime/c_api.cc).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace hvd {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A peer died or the network failed. The communicator is unusable afterwards.
class IoError : public Error {
 public:
  using Error::Error;
};

// This rank failed because a peer left or failed first (a link to it broke, or its failure
// notice arrived): what the launcher's failure summary must not headline (failure_reports.h).
class PeerLost : public IoError {
 public:
  using IoError::IoError;
};

// A wait ran past its deadline. The message names what was still missing.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The caller passed something invalid (flag, host spec, rank, tensor). Nothing was started.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A broken invariant inside hvd: a bug, or a peer speaking a different protocol.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
[[noreturn]] void throwEnforce(const char* file, int line, const std::string& what);
}  // namespace detail

}  // namespace hvd

// HVD_ENFORCE(cond, msg...) throws InternalError with the expression, file:line and the message.
#define HVD_ENFORCE(cond, ...)                                                                   \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      ::hvd::detail::throwEnforce(                                                               \
          __FILE__, __LINE__, ::hvd::detail::concat("check failed: " #cond " ", ##__VA_ARGS__)); \
  } while (0)

// HVD_ENFORCE_OP(a, op, b, msg...) prints both values, as Gloo's GLOO_ENFORCE_EQ does.
#define HVD_ENFORCE_OP(a, op, b, ...)                                                      \
  do {                                                                                     \
    const auto& hvd_lhs_ = (a);                                                            \
    const auto& hvd_rhs_ = (b);                                                            \
    if (!(hvd_lhs_ op hvd_rhs_))                                                           \
      ::hvd::detail::throwEnforce(                                                         \
          __FILE__, __LINE__,                                                              \
          ::hvd::detail::concat("check failed: " #a " " #op " " #b " (", hvd_lhs_, " vs ", \
                                hvd_rhs_, ") ", ##__VA_ARGS__));                           \
  } while (0)
#define HVD_ENFORCE_EQ(a, b, ...) HVD_ENFORCE_OP(a, ==, b, ##__VA_ARGS__)
#define HVD_ENFORCE_LE(a, b, ...) HVD_ENFORCE_OP(a, <=, b, ##__VA_ARGS__)
#define HVD_ENFORCE_LT(a, b, ...) HVD_ENFORCE_OP(a, <, b, ##__VA_ARGS__)
