// A small helper process that ends the workers' process groups if hvdrun dies without saying
// goodbye (SIGKILL, OOM killer): it holds the read end of a pipe from hvdrun, and end-of-file
// without a prior dismiss() means hvdrun is gone. It then sends SIGTERM to every watched group,
// waits the grace period, and sends SIGKILL; then it removes what the workers left in /dev/shm
// under the job's segment prefix.
// Must be started before the launcher starts any thread (it forks without exec).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

namespace hvd::launcher {

class OrphanGuardian {
 public:
  static std::unique_ptr<OrphanGuardian> start(std::chrono::seconds grace);
  ~OrphanGuardian();

  void watch(pid_t processGroup);
  // The job's shared-memory segment prefix (shm::jobSegmentPrefix): removed if hvdrun dies.
  void removeSegmentsOnDeath(const std::string& prefix);
  // hvdrun has ended every group itself; the guardian exits quietly.
  void dismiss();

 private:
  OrphanGuardian(pid_t pid, int pipeFd) : pid_(pid), fd_(pipeFd) {}
  void send(char command, pid_t value);

  pid_t pid_;
  int fd_;
};

}  // namespace hvd::launcher
