#include "runtime/engine/operation.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/format.h"

namespace hvd::runtime {
namespace {

bool firstDimMayDiffer(OpType t) { return t == OpType::Allgather || t == OpType::Alltoall; }
bool hasReduceOp(OpType t) { return t == OpType::Allreduce || t == OpType::Reducescatter; }

template <typename F>
std::string joinTensors(const OpRequest& r, F each) {
  std::ostringstream out;
  for (std::size_t i = 0; i < r.tensors.size(); ++i) out << (i ? ";" : "") << each(r.tensors[i]);
  return out.str();
}

std::string formatNumber(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

}  // namespace

const char* opTypeName(OpType t) {
  switch (t) {
    case OpType::Allreduce:
      return "allreduce";
    case OpType::Allgather:
      return "allgather";
    case OpType::Broadcast:
      return "broadcast";
    case OpType::Alltoall:
      return "alltoall";
    case OpType::Reducescatter:
      return "reducescatter";
    case OpType::Barrier:
      return "barrier";
    case OpType::Join:
      return "join";
    case OpType::AddProcessSet:
      return "add_process_set";
    case OpType::RemoveProcessSet:
      return "remove_process_set";
  }
  return "unknown";
}

std::string timelineRow(OpType type, const std::string& name) {
  std::string prefix = std::string(opTypeName(type)) + ".";
  return name.rfind(prefix, 0) == 0 ? name : prefix + name;
}

std::string timelinePhase(OpType type, const std::string& prefix) {
  std::string op = opTypeName(type);
  std::transform(op.begin(), op.end(), op.begin(), [](unsigned char c) { return std::toupper(c); });
  return prefix.empty() ? op : prefix + "_" + op;
}

std::string DeviceId::describe() const { return isCpu() ? "cpu" : "cuda:" + std::to_string(index); }

std::size_t TensorMeta::numElements() const {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::size_t TensorMeta::bytes() const { return numElements() * collectives::dtypeSize(dtype); }

OpRequest OpRequest::negotiated() const {
  OpRequest n = *this;
  if (firstDimMayDiffer(type))
    for (auto& t : n.tensors)
      if (!t.shape.empty()) t.shape[0] = -1;
  return n;
}

std::size_t OpRequest::totalBytes() const {
  std::size_t total = 0;
  for (const auto& t : tensors) total += t.bytes();
  return total;
}

std::string OpRequest::key() const {
  return processSet == 0 ? name : "ps" + std::to_string(processSet) + "/" + name;
}

std::string OpRequest::describe() const {
  std::string d = tensors.size() > 1 ? "grouped " : "";
  d.append(opTypeName(type)).append(" \"").append(name).append("\"");
  if (tensors.size() > 1) d.append(" (").append(std::to_string(tensors.size())).append(" tensors)");
  return d;
}

void OpRequest::encode(wire::Writer& w) const {
  w.put(type);
  w.putString(name);
  w.put(reduceOp);
  w.put(root);
  w.put(prescale);
  w.put(postscale);
  w.put(processSet);
  w.put(device.index);
  w.put<uint32_t>(static_cast<uint32_t>(tensors.size()));
  for (const auto& t : tensors) {
    w.put(t.dtype);
    w.putVector(t.shape);
  }
  w.putVector(setRanks);
}

OpRequest OpRequest::decode(wire::Reader& r) {
  OpRequest o;
  o.type = r.getEnum(OpType::RemoveProcessSet, "operation type");
  o.name = r.getString();
  o.reduceOp = r.getEnum(ReduceOp::Adasum, "reduce op");
  o.root = r.get<int32_t>();
  o.prescale = r.get<double>();
  o.postscale = r.get<double>();
  o.processSet = r.get<int32_t>();
  o.device.index = r.get<int32_t>();
  auto n = r.get<uint32_t>();
  for (uint32_t i = 0; i < n; ++i) {
    TensorMeta t;
    t.dtype = r.getEnum(DType::Bool, "dtype");
    t.shape = r.getVector<int64_t>();
    o.tensors.push_back(std::move(t));
  }
  o.setRanks = r.getVector<int32_t>();
  return o;
}

const std::vector<Property>& negotiatedProperties() {
  static const std::vector<Property> kProperties = {
      {"operation", [](const OpRequest& r) { return std::string(opTypeName(r.type)); }},
      {"process set", [](const OpRequest& r) { return std::to_string(r.processSet); }},
      {"device", [](const OpRequest& r) { return r.device.describe(); }},
      {"tensor count", [](const OpRequest& r) { return std::to_string(r.tensors.size()); }},
      {"dtype",
       [](const OpRequest& r) {
         return joinTensors(r, [](const TensorMeta& t) { return collectives::dtypeName(t.dtype); });
       }},
      {"shape",
       [](const OpRequest& r) {
         return joinTensors(r.negotiated(), [](const TensorMeta& t) { return shapeText(t.shape); });
       }},
      {"reduce op",
       [](const OpRequest& r) {
         return hasReduceOp(r.type) ? std::string(collectives::reduceOpName(r.reduceOp)) : "-";
       }},
      {"root rank",
       [](const OpRequest& r) {
         return r.type == OpType::Broadcast ? std::to_string(r.root) : std::string("-");
       }},
      {"prescale factor", [](const OpRequest& r) { return formatNumber(r.prescale); }},
      {"postscale factor", [](const OpRequest& r) { return formatNumber(r.postscale); }},
      {"process set ranks",
       [](const OpRequest& r) {
         std::vector<int64_t> v(r.setRanks.begin(), r.setRanks.end());
         return shapeText(v);
       }},
  };
  return kProperties;
}

}  // namespace hvd::runtime
