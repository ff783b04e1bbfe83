// How a failing rank tells the launcher why, so that the job's failure summary names the rank
// whose own error came first rather than the first to exit: a rank whose init fails may still
// be printing its traceback when its peer, which saw the link to it break, has already exited.
// Each rank posts one report in the job's rendezvous store when it fails, saying whether its
// failure is its own or a peer's; the launcher reads them once the job has ended. Keys live
// under job/<jobId>/failure/:
//   count   counter: reports posted so far (a report's number is its posting order)
//   <n>     report n
#pragma once

#include <string>
#include <vector>

#include "collectives/rendezvous/store.h"

namespace hvd::rendezvous {

struct FailureReport {
  int rank = -1;
  bool causedByPeer = false;  // the rank failed because a peer left or failed
  std::string message;        // the rank's error
};

// Posts `report`; throws what the store throws (callers treat it as best effort).
void postFailureReport(Store& store, const std::string& jobId, const FailureReport& report);
// Every report posted for `jobId`, in posting order.
std::vector<FailureReport> readFailureReports(Store& store, const std::string& jobId);
// The rank whose own failure was posted first (the job's root cause), or -1 when every report
// says its rank failed because of a peer, or there are none.
int firstOwnFailure(const std::vector<FailureReport>& reports);

}  // namespace hvd::rendezvous
