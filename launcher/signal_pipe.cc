#include "launcher/signal_pipe.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.h"

namespace hvd::launcher {
namespace {

int gPipe[2] = {-1, -1};

void onSignal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  ssize_t ignored = ::write(gPipe[1], &byte, 1);
  (void)ignored;
  errno = saved;
}

}  // namespace

SignalPipe::SignalPipe(std::initializer_list<int> signals) : signals_(signals) {
  HVD_ENFORCE(gPipe[0] < 0, "only one SignalPipe may exist at a time");
  if (::pipe2(gPipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw IoError(std::string("signal pipe: ") + std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : signals_) ::sigaction(sig, &sa, nullptr);
}

SignalPipe::~SignalPipe() {
  for (int sig : signals_) ::signal(sig, SIG_DFL);
  for (int& fd : gPipe) {
    ::close(fd);
    fd = -1;
  }
}

int SignalPipe::fd() const { return gPipe[0]; }

int SignalPipe::next() {
  unsigned char sig = 0;
  return ::read(gPipe[0], &sig, 1) == 1 ? sig : 0;
}

}  // namespace hvd::launcher
