// Binding a worker to its share of the host's CPUs, as mpirun --bind-to core does. Ranks that
// stay on their own cores are not migrated and do not take turns with another rank's threads
// on one core, which steadies an allreduce's time (docs/performance.md).
#pragma once

#include <string>
#include <vector>

namespace hvd::runtime {

enum class CpuBinding { Core, None };

// HVD_BIND_TO's value ("core" or "none"; the parameter registry accepts nothing else).
CpuBinding cpuBindingFrom(const std::string& text);

// The CPUs this process may run on (its affinity mask), ascending.
std::vector<int> allowedCpus();

// Local rank `localRank` of `localSize` gets a contiguous slice of `allowed`; slices differ in
// size by at most one and together cover `allowed`. Empty when there are fewer CPUs than local
// ranks: ranks would have to share cores, and binding would only pin the sharing in place.
std::vector<int> cpuSliceFor(const std::vector<int>& allowed, int localRank, int localSize);

// Restricts every thread of this process to `cpus`; threads it creates later inherit that.
// Throws IoError naming the CPUs and the reason when the kernel refuses.
void bindProcessTo(const std::vector<int>& cpus);

// What cpuShare and cpusOfLocalRanks need to know about one rank's process.
struct CpuShareFacts {
  int allowedCpus = 1;      // the CPUs this process may run on now, after any binding (0: unknown)
  int onlineCpus = 1;       // the host's
  int localSize = 1;        // ranks on this host
  bool boundByHvd = false;  // bindProcessTo narrowed the mask to this rank's slice
  bool externalLauncher = false;  // srun or mpirun started the rank and chose its mask
};

// How many compute threads (a framework's intra-op pool, torch's among them) this rank can run
// without its threads taking turns on a core with another local rank's. Frameworks size their
// pool from the whole mask at import, before hvd binds: two ranks on a 2-core machine then run
// 2 spinning OpenMP threads each on 1 core, and a training step takes about twice as long
// (docs/performance.md). At least 1.
int cpuShare(const CpuShareFacts& facts);

// The CPUs this host's ranks share, to tell whether they outnumber them: 0 where hvd bound each
// rank to a slice of its own (there was a CPU per rank) or where unknown; the host's online CPUs
// under srun or mpirun (whose mask may be this rank's alone); else the mask, common to the
// ranks hvdrun started (all CPUs, or taskset's).
int cpusOfLocalRanks(const CpuShareFacts& facts);

// "0-3,8" style, as /proc/self/status and taskset write CPU lists.
std::string cpuListText(const std::vector<int>& cpus);

}  // namespace hvd::runtime
