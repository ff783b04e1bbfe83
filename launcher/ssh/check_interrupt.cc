#include "launcher/ssh/check_interrupt.h"

#include <sys/socket.h>

namespace hvd::launcher::ssh {

void CheckInterrupt::interrupt() {
  std::lock_guard<std::mutex> lock(mutex_);
  interrupted_ = true;
  for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
}

bool CheckInterrupt::interrupted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return interrupted_;
}

void CheckInterrupt::watch(int fd) {
  std::lock_guard<std::mutex> lock(mutex_);
  fds_.insert(fd);
  if (interrupted_) ::shutdown(fd, SHUT_RDWR);
}

void CheckInterrupt::unwatch(int fd) {
  std::lock_guard<std::mutex> lock(mutex_);
  fds_.erase(fd);
}

}  // namespace hvd::launcher::ssh
