// The connect decisions (launcher/ssh/connect_attempts.h) with time passed in: no sockets.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>

#include "launcher/ssh/connect_attempts.h"

using namespace hvd::launcher::ssh;
using std::chrono::milliseconds;

namespace {

const ConnectAttempts::Time t0{};
const std::string kWhere = "host 'n1' (10.0.0.2 port 2222, user u): ";

SshTarget target() {
  SshTarget t;
  t.alias = "n1";
  t.address = "10.0.0.2";
  t.port = 2222;
  t.user = "u";
  return t;
}

}  // namespace

TEST_CASE("connect: a pending connect waits out what is left of the one deadline") {
  ConnectAttempts a(milliseconds(3000), false, t0);
  CHECK(a.pollMs(t0) == 3000);
  CHECK(a.pollMs(t0 + milliseconds(2500)) == 500);
  CHECK_FALSE(a.expired(t0 + milliseconds(2999)));
  CHECK(a.expired(t0 + milliseconds(3000)));
  CHECK(a.pollMs(t0 + milliseconds(4000)) == 0);
}

TEST_CASE("connect: with an interrupt, waits are slices of 100 ms") {
  ConnectAttempts a(milliseconds(3000), true, t0);
  CHECK(a.pollMs(t0) == kInterruptSliceMs);
  CHECK(a.pollMs(t0 + milliseconds(2950)) == 50);
}

TEST_CASE("connect: the next address is tried while time is left, after socket() always") {
  ConnectAttempts a(milliseconds(1000), false, t0);
  CHECK(a.attemptFailed(ECONNREFUSED, t0 + milliseconds(10)));
  CHECK_FALSE(a.attemptFailed(ETIMEDOUT, t0 + milliseconds(1000)));
  a.socketFailed(EAFNOSUPPORT);  // no time check: costs none
  CHECK(a.error(target(), kWhere).kind() == SshFailure::Unreachable);
}

TEST_CASE("connect: the error is the last address's failure, naming host and port") {
  ConnectAttempts a(milliseconds(1500), false, t0);
  SECTION("refused") {
    a.attemptFailed(ETIMEDOUT, t0);
    a.attemptFailed(ECONNREFUSED, t0);
    SshError e = a.error(target(), kWhere);
    CHECK(e.kind() == SshFailure::Refused);
    CHECK(std::string(e.what()) == kWhere + "connection refused (is sshd running on port 2222?)");
  }
  SECTION("timed out") {
    a.attemptFailed(ETIMEDOUT, t0);
    SshError e = a.error(target(), kWhere);
    CHECK(e.kind() == SshFailure::Timeout);
    CHECK(std::string(e.what()) ==
          kWhere + "connection timed out after 1500 ms (--ssh-connect-timeout)");
  }
  SECTION("unreachable") {
    a.attemptFailed(ENETUNREACH, t0);
    SshError e = a.error(target(), kWhere);
    CHECK(e.kind() == SshFailure::Unreachable);
    CHECK(std::string(e.what()) == kWhere + std::strerror(ENETUNREACH));
  }
  SECTION("anything else") {
    a.attemptFailed(EACCES, t0);
    SshError e = a.error(target(), kWhere);
    CHECK(e.kind() == SshFailure::Unreachable);
    CHECK(std::string(e.what()) == kWhere + "cannot connect: " + std::strerror(EACCES));
  }
}

TEST_CASE(
    "connect: a host still starting is tried again with a growing backoff until the "
    "deadline") {
  ConnectAttempts a(milliseconds(3000), false, t0);
  a.attemptFailed(ECONNREFUSED, t0);  // sshd not listening yet
  REQUIRE(a.retryable(t0));
  CHECK(a.backoff(t0) == milliseconds(100));
  CHECK(a.backoff(t0) == milliseconds(200));
  CHECK(a.backoff(t0) == milliseconds(400));
  for (int i = 0; i < 5; ++i) a.backoff(t0);
  CHECK(a.backoff(t0) == milliseconds(2000));                      // capped
  CHECK(a.backoff(t0 + milliseconds(2900)) == milliseconds(100));  // never past the deadline
  a.attemptFailed(EHOSTUNREACH, t0 + milliseconds(2950));          // no route yet
  CHECK(a.retryable(t0 + milliseconds(2950)));
  CHECK_FALSE(a.retryable(t0 + milliseconds(3000)));
  a.attemptFailed(ECONNREFUSED, t0 + milliseconds(3000));
  SshError e = a.error(target(), kWhere);
  CHECK(std::string(e.what()) ==
        kWhere +
            "connection refused (is sshd running on port 2222?) (tried 11 times within "
            "--ssh-connect-timeout 3000 ms)");
}

TEST_CASE("connect: a name not yet resolvable is retried; other failures are final") {
  ConnectAttempts a(milliseconds(3000), false, t0);
  a.resolveFailed("Name or service not known", true);
  CHECK(a.retryable(t0));
  CHECK(a.lastFailure() == "cannot resolve the name: Name or service not known");
  a.backoff(t0);
  SshError e = a.error(target(), kWhere);
  CHECK(e.kind() == SshFailure::Resolve);
  CHECK(std::string(e.what()) == kWhere +
                                     "cannot resolve '10.0.0.2': Name or service not known "
                                     "(tried 2 times within --ssh-connect-timeout 3000 ms)");
  a.resolveFailed("ai_family not supported", false);
  CHECK_FALSE(a.retryable(t0));
  a.attemptFailed(ETIMEDOUT, t0);  // a silent host used up the time already
  CHECK_FALSE(a.retryable(t0));
  a.attemptFailed(EACCES, t0);
  CHECK_FALSE(a.retryable(t0));
}
