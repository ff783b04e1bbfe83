// What the byte-stream transports (tcp, shm) share: the 16-byte header each message starts
// with, a queued send or receive, and how a request is created and described in errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "collectives/transport/connection.h"

namespace hvd::collectives {

struct MessageHeader {
  uint64_t tag;
  uint64_t length;
};

// A send or receive in a connection's queue.
struct QueuedMessage {
  MessageHeader header;
  std::byte* data;
  std::shared_ptr<RequestState> state;
  std::size_t done = 0;  // bytes of header and payload moved so far
};

std::string hexTag(Tag tag);  // "0x1f"

std::shared_ptr<RequestState> newRequestState(const char* verb, Tag tag, std::size_t bytes,
                                              const RequestDescriber* describer);

// "rank 0/2: recv from rank 1 (127.0.0.1:3456) tag=0x7 64 bytes"
std::string describeRequest(int selfRank, int size, int peerRank, const std::string& peerAddress,
                            const RequestState& request);

}  // namespace hvd::collectives
