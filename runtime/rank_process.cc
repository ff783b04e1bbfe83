#include "runtime/rank_process.h"

#include <unistd.h>

#include "common/error.h"
#include "common/open_files.h"
#include "runtime/malloc_retention.h"

namespace hvd::runtime {
namespace {

// True when this process is now bound to its slice.
bool bindToLocalShare(const Topology& t, const std::shared_ptr<spdlog::logger>& logger) {
  try {
    std::vector<int> allowed = allowedCpus();
    std::vector<int> mine = cpuSliceFor(allowed, t.localRank, t.localSize);
    if (mine.empty()) {
      logger->debug("not binding to CPUs: {} local ranks share the {} CPUs {}", t.localSize,
                    allowed.size(), cpuListText(allowed));
      return false;
    }
    bindProcessTo(mine);
    logger->info("bound to CPUs {} (local rank {} of {}; HVD_BIND_TO=none turns this off)",
                 cpuListText(mine), t.localRank, t.localSize);
    return true;
  } catch (const Error& e) {
    logger->warn("running unbound: {}", e.what());
    return false;
  }
}

// A large job's links would run past the usual soft limit of 1,024 open files.
void fitOpenFiles(const Topology& t, spdlog::logger& logger) {
  auto files =
      ensureOpenFiles(rankLinkFiles(t.rank, t.size) + kOpenFilesKept,
                      detail::concat("rank ", t.rank, "/", t.size, " on host ", t.hostname),
                      detail::concat("a job of ", t.size, " ranks (a socket to each peer",
                                     t.rank == 0 ? ", two on rank 0)" : ")"));
  if (files.raised())
    logger.info("raised the open-file limit (ulimit -n) from {} to {} for the links of {} ranks",
                files.before, files.after, t.size);
}

CpuShareFacts cpuFactsOf(const Config& config, bool boundByHvd) {
  CpuShareFacts facts{.localSize = config.topology.localSize,
                      .boundByHvd = boundByHvd,
                      .externalLauncher = !config.externalLauncher.empty()};
  try {
    facts.allowedCpus = static_cast<int>(allowedCpus().size());
  } catch (const Error&) {
    facts.allowedCpus = 0;
  }
  facts.onlineCpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return facts;
}

}  // namespace

CpuShareFacts prepareRankProcess(const Config& config, bool ownProcess, log::Logs& logs) {
  auto logger = logs.get("runtime");
  retainFreedMemory(config.mallocRetainBytes, *logger);
  const Topology& t = config.topology;
  bool bound = false;
  if (ownProcess && t.size > 1) {
    bound = config.externalLauncher.empty() && config.cpuBinding == CpuBinding::Core &&
            bindToLocalShare(t, logger);
    fitOpenFiles(t, *logger);
  }
  return cpuFactsOf(config, bound);
}

}  // namespace hvd::runtime
