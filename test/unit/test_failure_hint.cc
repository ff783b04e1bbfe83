#include <catch2/catch.hpp>

#include "launcher/failure_hint.h"

using namespace hvd::launcher;

TEST_CASE("a Horovod script run without --horovod-compat gets a hint naming the flag") {
  std::vector<std::string> lines = {
      "Traceback (most recent call last):", "  File \"train.py\", line 3, in <module>",
      "    import horovod.torch as hvd", "ModuleNotFoundError: No module named 'horovod'"};
  CHECK_THAT(failureHint(lines, false),
             Catch::StartsWith("hvdrun: hint: ") && Catch::Contains("--horovod-compat"));
  // Already on the compatibility package, or another missing module: nothing to suggest.
  CHECK(failureHint(lines, true).empty());
  CHECK(failureHint({"ModuleNotFoundError: No module named 'horovod.spark'"}, false).size() > 0);
  CHECK(failureHint({"ModuleNotFoundError: No module named 'horovod_tools'"}, false).empty());
  CHECK(failureHint({"ModuleNotFoundError: No module named 'torchvision'"}, false).empty());
  CHECK(failureHint({}, false).empty());
}
