#include "launcher/failure_hint.h"

namespace hvd::launcher {

std::string failureHint(const std::vector<std::string>& stderrLines, bool horovodCompat) {
  if (horovodCompat) return "";
  for (const auto& line : stderrLines) {
    // Python's message for `import horovod.torch` (or any horovod module) without Horovod.
    if (line.find("No module named 'horovod'") != std::string::npos ||
        line.find("No module named 'horovod.") != std::string::npos)
      return "hvdrun: hint: the script imports horovod, which is not installed: add "
             "--horovod-compat to run it on hvd's compatibility package (import horovod.torch, "
             "horovod.tensorflow, horovod.tensorflow.keras, horovod.keras)\n";
  }
  return "";
}

}  // namespace hvd::launcher
