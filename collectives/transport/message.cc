#include "collectives/transport/message.h"

#include <cstdio>

#include "common/error.h"

namespace hvd::collectives {

std::string hexTag(Tag tag) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(tag));
  return buf;
}

std::shared_ptr<RequestState> newRequestState(const char* verb, Tag tag, std::size_t bytes,
                                              const RequestDescriber* describer) {
  auto state = std::make_shared<RequestState>();
  state->verb = verb;
  state->tag = tag;
  state->bytes = bytes;
  state->describer = describer;
  return state;
}

std::string describeRequest(int selfRank, int size, int peerRank, const std::string& peerAddress,
                            const RequestState& request) {
  return detail::concat("rank ", selfRank, "/", size, ": ", request.verb, " rank ", peerRank, " (",
                        peerAddress, ") tag=", hexTag(request.tag), " ", request.bytes, " bytes");
}

}  // namespace hvd::collectives
