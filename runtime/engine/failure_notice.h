// How a failing engine tells its peers why, and how a rank whose link broke learns that the
// peer failed first: rank 0 sends a Fatal response to every rank, the others send rank 0 a
// RequestList carrying `failure`. Best effort: a dead peer reads nothing. Engine thread only.
#pragma once

#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "runtime/engine/control_channel.h"
#include "runtime/engine/local_op.h"

namespace hvd::runtime {

// `error` with the operation's description in front, of the same type (an IoError stays one).
std::exception_ptr inOperation(const std::string& description, std::exception_ptr error);

// The error's message ("unknown error" for what is not a std::exception).
std::string whatOf(std::exception_ptr error);

// True when the error says a peer left or failed first (PeerLost), in an operation or not.
bool causedByPeer(std::exception_ptr error);

// What a std::bad_alloc while running `ops` (a response of `type`; null entries: joined ranks'
// zeros) becomes: an error naming the rank, the operation and this rank's input bytes.
std::exception_ptr outOfMemory(int rank, const std::string& type, const std::vector<LocalOp*>& ops);

// Sends this rank's failure (`why`) and waits up to a second for it to leave. Never throws.
void announceFailure(ControlChannel& control, int rank, int size, const std::string& why);

// Waits up to `wait` for a peer's notice that it failed ("rank P had failed: ..." on rank 0,
// "the job had failed: ..." elsewhere), reading what the living peers sent; "" if none came.
// Never throws.
std::string peerFailure(ControlChannel& control, int rank, std::chrono::milliseconds wait);

// What a rank whose collective failed with `error` reports: it announces its failure (every
// rank announces before it listens: ranks that waited for each other's notice first would each
// hear nothing), then listens briefly for a peer that failed first. A link that broke because
// its peer failed is not the cause: when a peer's notice came, the result names it too, as
// PeerLost; else it is `error`. Never throws.
std::exception_ptr reportCollectiveFailure(ControlChannel& control, int rank, int size,
                                           std::exception_ptr error);

}  // namespace hvd::runtime
