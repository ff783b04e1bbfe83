// What a rank asks the engine to do, as the coordinator sees it: the operation's kind, name and
// the properties every rank must agree on. The tensors' memory stays with the caller (see
// engine.h); this is only the description that travels in control messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/algorithms/dtype.h"
#include "runtime/engine/wire.h"

namespace hvd::runtime {

using collectives::DType;
using collectives::ReduceOp;

// Codes run from 0 to RemoveProcessSet, the last (OpRequest::decode checks the range): append.
enum class OpType : uint8_t {
  Allreduce,
  Allgather,
  Broadcast,
  Alltoall,
  Reducescatter,
  Barrier,
  Join,
  AddProcessSet,
  RemoveProcessSet
};
const char* opTypeName(OpType t);
// The timeline's names, Horovod's (tools that read its timelines look for them): a tensor's row
// "<op>.<name>" (an unnamed operation's engine name, "<op>.noname.<n>", already is one), and a
// phase "<OP>" or "<PREFIX>_<OP>" in capitals ("NEGOTIATE_ALLREDUCE").
std::string timelineRow(OpType type, const std::string& name);
std::string timelinePhase(OpType type, const std::string& prefix = "");

// Where a tensor lives: the host, or a CUDA device by index.
struct DeviceId {
  static constexpr int32_t kCpu = -1;
  int32_t index = kCpu;
  bool isCpu() const { return index == kCpu; }
  std::string describe() const;  // "cpu", "cuda:1"
  bool operator==(const DeviceId&) const = default;
};

struct TensorMeta {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  std::size_t numElements() const;
  std::size_t bytes() const;
  bool operator==(const TensorMeta&) const = default;
};

struct OpRequest {
  OpType type = OpType::Allreduce;
  std::string name;
  ReduceOp reduceOp = ReduceOp::Sum;
  int32_t root = 0;  // broadcast
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t processSet = 0;
  DeviceId device;
  std::vector<TensorMeta> tensors;  // several for a grouped operation
  std::vector<int32_t> setRanks;    // AddProcessSet: the new set's ranks; RemoveProcessSet: {id}

  // The part every rank must agree on: allgather's and alltoall's first dimensions may differ
  // per rank (the collective itself exchanges them), so they are zeroed here.
  OpRequest negotiated() const;
  std::size_t totalBytes() const;
  // What identifies the operation in negotiation: names are scoped by process set, as in
  // Horovod, so two sets may each run a "grad.w".
  std::string key() const;
  // `allreduce "grad.w"`, or `grouped allreduce "g" (3 tensors)`
  std::string describe() const;
  bool operator==(const OpRequest&) const = default;

  void encode(wire::Writer& w) const;
  static OpRequest decode(wire::Reader& r);
};

// The properties two ranks' requests for one name must share; each entry formats one property
// of a request as text. The first property whose texts differ is reported (negotiation.cc).
struct Property {
  const char* name;
  std::string (*format)(const OpRequest&);
};
const std::vector<Property>& negotiatedProperties();

}  // namespace hvd::runtime
