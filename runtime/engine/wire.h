// A compact binary encoding for the engine's control messages (little-endian host order: every
// rank of a job runs on the same architecture). The Reader checks every length against what is
// left and every enum code against the enum's range, so a truncated or corrupt message is an
// InternalError, never an out-of-bounds read or an unknown enum value.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"

namespace hvd::runtime::wire {

class Writer {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void putString(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  template <typename T>
  void putVector(const std::vector<T>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const T& x : v) put<T>(x);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : p_(in.data()), end_(in.data() + in.size()) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, p_, sizeof value);
    p_ += sizeof value;
    return value;
  }
  // An enum written as its underlying value, whose codes run from 0 to `last`: a code above it
  // (a corrupt message, or a peer with a newer build) is an InternalError naming `what`, so no
  // unknown value reaches the code that switches over the enum.
  template <typename E>
  E getEnum(E last, const char* what) {
    using Code = std::underlying_type_t<E>;
    static_assert(std::is_unsigned_v<Code>);
    auto code = get<Code>();
    if (code > static_cast<Code>(last))
      throw InternalError(
          detail::concat("control message: unknown ", what, " code ", static_cast<uint64_t>(code)));
    return static_cast<E>(code);
  }
  std::string getString() {
    auto n = get<uint32_t>();
    need(n);
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> getVector() {
    auto n = get<uint32_t>();
    need(static_cast<std::size_t>(n) * sizeof(T));
    std::vector<T> v(n);
    for (auto& x : v) x = get<T>();
    return v;
  }
  bool atEnd() const { return p_ == end_; }

 private:
  void need(std::size_t n) const {
    if (static_cast<std::size_t>(end_ - p_) < n)
      throw InternalError(
          detail::concat("control message truncated: need ", n, " bytes, ", end_ - p_, " left"));
  }
  const char* p_;
  const char* end_;
};

}  // namespace hvd::runtime::wire
