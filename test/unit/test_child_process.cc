#include <catch2/catch.hpp>

#include <chrono>

#include "common/child_process.h"
#include "common/error.h"

using hvd::runProgram;
using namespace std::chrono_literals;

TEST_CASE("a helper program gets its stdin and gives its output and exit code") {
  auto echoed = runProgram({"cat"}, "payload\n", 5s);
  CHECK(echoed.exitCode == 0);
  CHECK(echoed.out == "payload\n");
  auto failed = runProgram({"sh", "-c", "echo why >&2; exit 3"}, "", 5s);
  CHECK(failed.exitCode == 3);
  CHECK(failed.err == "why\n");
  // A program that never reads its stdin: the input is dropped, this process lives on.
  auto deaf = runProgram({"sh", "-c", "exec <&-; echo done"}, std::string(1 << 20, 'x'), 5s);
  CHECK(deaf.out == "done\n");
  CHECK(runProgram({"sh", "-c", "kill -9 $$"}, "", 5s).exitCode == 128 + 9);
  CHECK(runProgram({"head", "-c", "100000", "/dev/zero"}, "", 5s, 10).out.size() == 10);
}

TEST_CASE("a helper program that is missing or runs too long is an error naming it") {
  REQUIRE_THROWS_AS(runProgram({"hvd-no-such-program"}, "", 5s), hvd::IoError);
  REQUIRE_THROWS_WITH(runProgram({"hvd-no-such-program"}, "", 5s),
                      Catch::Contains("cannot run hvd-no-such-program"));
  auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(runProgram({"sleep", "10"}, "", 200ms),
                      Catch::Contains("sleep did not finish within 200 ms"));
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}
