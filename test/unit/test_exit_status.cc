#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include "launcher/exit_status.h"

using namespace hvd::launcher;

TEST_CASE("exit statuses map to shell codes and sentences") {
  ExitStatus code3{false, 3};
  CHECK(code3.failed());
  CHECK(code3.shellCode() == 3);
  CHECK(code3.describe() == "exited with code 3");
  ExitStatus killed{true, SIGKILL};
  CHECK(killed.shellCode() == 137);
  CHECK_THAT(killed.describe(), Catch::Contains("SIGKILL") && Catch::Contains("out-of-memory"));
  CHECK(ExitStatus{true, SIGSEGV}.describe() == "was killed by signal 11 (SIGSEGV)");
  CHECK_FALSE(ExitStatus{false, 0}.failed());
  ExitStatus lost{false, 255};
  lost.connectionLost = true;
  CHECK(lost.shellCode() == 255);
  CHECK_THAT(lost.describe(), Catch::StartsWith("was lost with hvdrun's SSH connection"));
}
