// CheckInterrupt on real sockets: a blocked read returns once interrupted, and a socket
// watched after the interrupt is shut down at once.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "launcher/ssh/check_interrupt.h"

using hvd::launcher::ssh::CheckInterrupt;

TEST_CASE("an interrupt wakes a read blocked on a watched socket, and later sockets at once") {
  int first[2], second[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, first) == 0);
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, second) == 0);
  CheckInterrupt interrupt;
  interrupt.watch(first[0]);
  CHECK_FALSE(interrupt.interrupted());
  auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    interrupt.interrupt();
  });
  char byte;
  CHECK(::read(first[0], &byte, 1) == 0);  // blocked until the shutdown, then end of stream
  stopper.join();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(interrupt.interrupted());
  interrupt.watch(second[0]);
  CHECK(::read(second[0], &byte, 1) == 0);
  // An unwatched socket is left alone.
  interrupt.unwatch(second[0]);
  int third[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, third) == 0);
  REQUIRE(::write(third[1], "x", 1) == 1);
  CHECK(::read(third[0], &byte, 1) == 1);
  for (int fd : {first[0], first[1], second[0], second[1], third[0], third[1]}) ::close(fd);
}
