// What hvdrun adds to its failure summary when a failed rank's last stderr lines show a cause
// it can name: a Horovod script run without --horovod-compat.
#pragma once

#include <string>
#include <vector>

namespace hvd::launcher {

// A line that starts with "hvdrun: hint: ", or "" when the lines suggest nothing.
std::string failureHint(const std::vector<std::string>& stderrLines, bool horovodCompat);

}  // namespace hvd::launcher
