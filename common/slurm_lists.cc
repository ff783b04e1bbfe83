#include "common/slurm_lists.h"

#include <sstream>

#include "common/error.h"
#include "common/params.h"

namespace hvd::slurm {
namespace {

// Splits on commas that are not inside brackets.
std::vector<std::string> splitTopLevel(const std::string& text, const std::string& what) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) throw InvalidArgument(what + " '" + text + "': unbalanced ']'");
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) throw InvalidArgument(what + " '" + text + "': unbalanced '['");
  parts.push_back(current);
  return parts;
}

std::string padded(long value, std::size_t width) {
  std::string digits = std::to_string(value);
  return std::string(width > digits.size() ? width - digits.size() : 0, '0') + digits;
}

// "node[01-03,07]suffix" -> its hosts. Handles one bracket group per name, as Slurm prints.
void expandOne(const std::string& part, const std::string& whole, std::vector<std::string>& out) {
  std::string what = "SLURM_JOB_NODELIST '" + whole + "'";
  if (part.empty()) throw InvalidArgument(what + ": empty host name");
  auto open = part.find('[');
  if (open == std::string::npos) {
    out.push_back(part);
    return;
  }
  auto close = part.find(']', open);
  std::string prefix = part.substr(0, open), suffix = part.substr(close + 1);
  std::stringstream ranges(part.substr(open + 1, close - open - 1));
  std::string range;
  while (std::getline(ranges, range, ',')) {
    auto dash = range.find('-');
    std::string lo = range.substr(0, dash);
    std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    long a = params::parseInt(lo, 0, 1L << 40, what + ": range '" + range + "'");
    long b = params::parseInt(hi, a, a + 100000, what + ": range '" + range + "'");
    for (long v = a; v <= b; ++v) out.push_back(prefix + padded(v, lo.size()) + suffix);
  }
}

}  // namespace

std::vector<std::string> expandNodeList(const std::string& nodeList) {
  std::vector<std::string> hosts;
  for (const auto& part : splitTopLevel(nodeList, "SLURM_JOB_NODELIST"))
    expandOne(part, nodeList, hosts);
  return hosts;
}

std::vector<int> expandTasksPerNode(const std::string& tasksPerNode) {
  std::vector<int> counts;
  std::string what = "SLURM_TASKS_PER_NODE '" + tasksPerNode + "'";
  for (const auto& part : splitTopLevel(tasksPerNode, "SLURM_TASKS_PER_NODE")) {
    auto paren = part.find("(x");
    int tasks = static_cast<int>(params::parseInt(part.substr(0, paren), 1, 1 << 20, what));
    int repeat = 1;
    if (paren != std::string::npos) {
      if (part.back() != ')') throw InvalidArgument(what + ": '" + part + "' lacks ')'");
      repeat = static_cast<int>(params::parseInt(part.substr(paren + 2, part.size() - paren - 3), 1,
                                                 1 << 20, what + ": '" + part + "'"));
    }
    counts.insert(counts.end(), repeat, tasks);
  }
  return counts;
}

}  // namespace hvd::slurm
