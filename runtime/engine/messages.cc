#include "runtime/engine/messages.h"

namespace hvd::runtime {

std::string RequestList::encode() const {
  wire::Writer w;
  w.put(responseListsSeen);
  w.put<uint8_t>(shutdown);
  w.putString(failure);
  w.put<uint32_t>(static_cast<uint32_t>(submissions.size()));
  for (const auto& s : submissions) {
    w.put(s.cacheId);
    if (s.cacheId == 0) s.request.encode(w);
    w.putString(s.inlineData);
  }
  return w.take();
}

RequestList RequestList::decode(const std::string& bytes) {
  wire::Reader r(bytes);
  RequestList l;
  l.responseListsSeen = r.get<uint64_t>();
  l.shutdown = r.get<uint8_t>() != 0;
  l.failure = r.getString();
  auto n = r.get<uint32_t>();
  for (uint32_t i = 0; i < n; ++i) {
    Submission s;
    s.cacheId = r.get<uint64_t>();
    if (s.cacheId == 0) s.request = OpRequest::decode(r);
    s.inlineData = r.getString();
    l.submissions.push_back(std::move(s));
  }
  if (!r.atEnd()) throw InternalError("request list has trailing bytes");
  return l;
}

std::string ResponseList::encode() const {
  wire::Writer w;
  w.put(seq);
  w.putVector(evictedCacheIds);
  w.put<uint32_t>(static_cast<uint32_t>(responses.size()));
  for (const auto& x : responses) {
    w.put(x.kind);
    w.put(x.type);
    w.put<uint32_t>(static_cast<uint32_t>(x.names.size()));
    for (const auto& n : x.names) w.putString(n);
    w.putVector(x.cacheIds);
    w.putString(x.message);
    w.put(x.value);
    w.put<uint32_t>(static_cast<uint32_t>(x.forJoined.size()));
    for (const auto& j : x.forJoined) j.encode(w);
    w.putString(x.inlineResult);
    w.put(x.fusionThresholdBytes);
  }
  return w.take();
}

ResponseList ResponseList::decode(const std::string& bytes) {
  wire::Reader r(bytes);
  ResponseList l;
  l.seq = r.get<uint64_t>();
  l.evictedCacheIds = r.getVector<uint64_t>();
  auto n = r.get<uint32_t>();
  for (uint32_t i = 0; i < n; ++i) {
    Response x;
    x.kind = r.getEnum(ResponseKind::Fatal, "response kind");
    x.type = r.getEnum(OpType::RemoveProcessSet, "operation type");
    auto names = r.get<uint32_t>();
    for (uint32_t k = 0; k < names; ++k) x.names.push_back(r.getString());
    x.cacheIds = r.getVector<uint64_t>();
    x.message = r.getString();
    x.value = r.get<int32_t>();
    auto joined = r.get<uint32_t>();
    for (uint32_t k = 0; k < joined; ++k) x.forJoined.push_back(OpRequest::decode(r));
    x.inlineResult = r.getString();
    x.fusionThresholdBytes = r.get<uint64_t>();
    l.responses.push_back(std::move(x));
  }
  if (!r.atEnd()) throw InternalError("response list has trailing bytes");
  return l;
}

}  // namespace hvd::runtime
