#include "runtime/cpu_binding.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace hvd::runtime {

CpuBinding cpuBindingFrom(const std::string& text) {
  return text == "none" ? CpuBinding::None : CpuBinding::Core;
}

std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    throw IoError(std::string("sched_getaffinity: ") + std::strerror(errno));
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

std::vector<int> cpuSliceFor(const std::vector<int>& allowed, int localRank, int localSize) {
  auto n = static_cast<long>(allowed.size());
  if (localSize < 1 || localRank < 0 || localRank >= localSize || n < localSize) return {};
  long begin = n * localRank / localSize, end = n * (localRank + 1) / localSize;
  return {allowed.begin() + begin, allowed.begin() + end};
}

int cpuShare(const CpuShareFacts& f) {
  if (f.boundByHvd) return std::max(1, f.allowedCpus);
  // A launcher that narrowed the mask gave this rank its own CPUs; a whole-host mask is shared
  // by every local rank.
  if (f.externalLauncher && f.allowedCpus < f.onlineCpus) return std::max(1, f.allowedCpus);
  return std::max(1, f.allowedCpus / std::max(1, f.localSize));
}

int cpusOfLocalRanks(const CpuShareFacts& f) {
  if (f.boundByHvd) return 0;
  return f.externalLauncher ? f.onlineCpus : f.allowedCpus;
}

std::string cpuListText(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

void bindProcessTo(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  auto refuse = [&](const std::string& why) {
    throw IoError("cannot bind to CPUs " + cpuListText(cpus) + ": " + why +
                  " (HVD_BIND_TO=none or hvdrun --bind-to none turns binding off)");
  };
  // sched_setaffinity applies to one thread; the threads that exist already (a framework's
  // pools, started before hvd.init()) are each listed under /proc/self/task.
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) refuse(std::string("/proc/self/task: ") + std::strerror(errno));
  int error = 0;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    pid_t tid = static_cast<pid_t>(std::atol(entry->d_name));
    // A thread may exit between the listing and the call; that is no failure.
    if (sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH) error = errno;
  }
  closedir(tasks);
  if (error) refuse(std::strerror(error));
}

}  // namespace hvd::runtime
