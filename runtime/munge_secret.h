// A job secret for ranks that srun started without one in their environment. Rank 0 makes it
// and hands it to each rank that asks, on HVD_RENDEZVOUS_PORT + 1, inside a credential of munge,
// the authentication service every Slurm cluster with auth/munge runs on each node: encoded
// for this user alone (only a process of this uid can decode it) and naming this uid as its
// maker, which the asking rank checks. A process of another user can neither read the secret
// nor pass off one of its own; munge refuses a credential decoded twice on a node, so each rank
// gets one of its own. Uses the munge and unmunge programs and munged's default socket.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/logging.h"

namespace hvd::runtime {

// Both programs are in one of `path`'s directories (the PATH of the environment the Config was
// read from).
bool mungeAvailable(const std::string& path);

// Rank 0's side: serves `secret` for `jobId` on bindAddress:port until destroyed.
class MungeSecretServer {
 public:
  // Throws IoError when the port cannot be bound.
  MungeSecretServer(const std::string& bindAddress, uint16_t port, std::string jobId,
                    std::string secret, std::shared_ptr<log::Logs> logs);
  ~MungeSecretServer();
  MungeSecretServer(const MungeSecretServer&) = delete;
  MungeSecretServer& operator=(const MungeSecretServer&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Another rank's side: asks rank 0 at address:port, trying again while nothing listens there
// yet, until `timeout`. Throws IoError/TimeoutError saying what failed: no answer, a credential
// munge refuses (with its reason), one made by another user or for another job.
std::string fetchMungeSecret(const std::string& address, uint16_t port, const std::string& jobId,
                             std::chrono::milliseconds timeout);

}  // namespace hvd::runtime
