// What a collective's time depends on, in Hockney's α-β form plus a reduction cost γ: a message
// of b bytes over a link takes `latency + b / bandwidth`, reducing b bytes takes
// `b / reduceBytesPerSecond`. One description of a cluster (links, topology, reduction speed)
// that the simulated transport runs on and the algorithm chooser reasons with, so the two
// cannot disagree about the machine.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hvd::collectives {

struct LinkModel {
  double latencySeconds = 0;  // α: a message's fixed cost, end to end
  double bytesPerSecond = 0;  // 1/β
};

// Allreduce times measured by hvd-bench calibrate on a job's own layout: over `link`
// (Comm::linkName: "shm", "tcp") with `ranks` ranks, `ranksPerHost` on each of its hosts (all on
// one host when it equals `ranks`), each algorithm's median seconds (by its
// HVD_ALLREDUCE_ALGORITHM name) at each of `bytes`. Where a table matches a communicator (link,
// ranks and ranks per host), Auto picks from it instead of the formulas and the size threshold:
// the crossovers are the machine's own (a loopback's throughput, for one, changes with message
// size in ways no latency-bandwidth pair captures; hosts whose ranks share cores with other work
// pay a scheduler's hand-off per round, which no NIC figure holds).
// The allreduce algorithms a measured table may time, named in the file as
// HVD_ALLREDUCE_ALGORITHM names them.
enum class TimedAlgorithm : uint8_t { RecursiveDoubling, Ring, Rabenseifner };
const char* timedAlgorithmName(TimedAlgorithm algorithm);

struct MeasuredAllreduce {
  std::string link;
  int ranks = 2;
  std::vector<double> bytes;                           // ascending
  std::map<std::string, std::vector<double>> seconds;  // one per size
  // 0 (or `ranks`): one host. NetworkModel::setMeasured writes `ranks` for 0.
  int ranksPerHost = 0;

  bool withinOneHost() const { return ranksPerHost <= 0 || ranksPerHost >= ranks; }

  // The algorithm with the least time at `bytes`, each interpolated between the measured sizes
  // around it (log-log) and held beyond the ends. From the picks derivePicks() made: Auto asks
  // once per allreduce, so this is a binary search, not the interpolation.
  TimedAlgorithm fastestAt(double bytes) const;
  // Tabulates fastestAt: where the fastest changes, to a 64th of each interval (log scale).
  // NetworkModel::setMeasured calls it; throws InvalidArgument for a name it does not time.
  void derivePicks();

  // Derived by derivePicks: from pickFrom[i] bytes on (ascending), pick[i] is the fastest.
  std::vector<double> pickFrom;
  std::vector<TimedAlgorithm> pick;
};

struct NetworkModel {
  // Between two ranks of one host (shared memory): each rank's copies run at this rate...
  LinkModel intraHost{0.3e-6, 6e9};
  // Between two ranks of one host in a communicator that spans several hosts: hvd links such a
  // communicator with one transport, TCP, so they talk through the host's loopback (the
  // hierarchical form's stages within a host use shared memory).
  LinkModel sameHostTcp{4e-6, 2.5e9};
  // ...and all copies of one host together at most at this rate (its memory bandwidth).
  double hostMemoryBytesPerSecond = 20e9;
  // Between hosts: every host has one NIC, which its ranks share, full duplex.
  LinkModel interHost{5e-6, 12.5e9};
  // What a byte that arrives through the NIC costs the receiving host's memory, in copies at
  // hostMemoryBytesPerSecond. TCP, hvd's transport between hosts, copies it out of the socket
  // buffer the NIC wrote it to: 1. A NIC writing straight into the receiving buffer (RDMA) costs
  // about half a copy (one pass over the memory, not a read and a write); 0 lets NIC traffic
  // bypass host memory. The sender's copy into its socket buffer is left out: the simulator books
  // a resource when a message is posted, so a host that forwards what it receives (a pipelined
  // chain) would find its memory booked by messages yet to come and stop overlapping. The
  // receiver's copy alone already puts every byte a host's ranks receive through its memory.
  double nicMemoryCopies = 1.0;
  // Hosts hang off switches of this many hosts (0: one switch for all). A message between
  // switches pays `switchHopLatency` more and crosses both switches' uplinks, whose bandwidth is
  // `uplinkBytesPerSecond` (0: non-blocking, hostsPerSwitch NICs' worth).
  int hostsPerSwitch = 0;
  double switchHopLatency = 1e-6;
  double uplinkBytesPerSecond = 0;
  // Reducing b bytes (dst = op(a, b)) on one core.
  double reduceBytesPerSecond = 4e9;
  // Consecutive ranks share a host: rank r is on host r / ranksPerHost.
  int ranksPerHost = 1;
  std::vector<MeasuredAllreduce> measuredAllreduce;  // added by setMeasured

  // The table for `link`, `ranks` and `ranksPerHost` (`ranks` or more: one host), or null.
  const MeasuredAllreduce* measured(const std::string& link, int ranks, int ranksPerHost) const;
  // Adds `table`, replacing one of the same link, ranks and ranks per host.
  void setMeasured(MeasuredAllreduce table);

  int hostOf(int rank) const { return rank / ranksPerHost; }
  // The link between two ranks of one host on a communicator that does or does not span
  // several hosts (the rule of runtime/transport_table.h: one transport per communicator).
  const LinkModel& sameHostLink(bool spansHosts) const {
    return spansHosts ? sameHostTcp : intraHost;
  }
  int switchOf(int host) const { return hostsPerSwitch > 0 ? host / hostsPerSwitch : 0; }
  bool sameHost(int a, int b) const { return hostOf(a) == hostOf(b); }
  double reduceSeconds(double bytes) const { return bytes / reduceBytesPerSecond; }

  // This model for hosts whose ranksPerHost ranks share `coresPerHost` cores. With fewer cores
  // than ranks (oversubscription: CI, laptops, tests), a rank copies within its host, and
  // reduces, at cores / ranksPerHost of the rates above: each is a core's work, and the ranks
  // take turns on the cores. A NIC's bandwidth and the host memory's stay. With as many cores as
  // ranks or more (or coresPerHost 0, unknown) the model is unchanged. On 8 ranks per host and
  // 2 cores, TCP within a host then costs what it measures there (several copies and the
  // network stack per byte) against shared memory, and auto stages a large allreduce across
  // such hosts, which measures faster than the flat ring (docs/performance.md).
  NetworkModel sharingCores(int coresPerHost) const;

  // "8 ranks per host, 16 hosts per switch; NIC 5 us 12.5 GB/s, copied 1x through the
  // receiving host's memory; shm 0.3 us 6 GB/s (host 20 GB/s); ..."
  std::string describe() const;
  // JSON with the fields above (snake_case, seconds and bytes per second; the tables as
  // "measured_allreduce": [{"link", "ranks", "ranks_per_host", "bytes": [...],
  // "seconds": {name: [...]}}], ranks_per_host optional: one host);
  // parsing takes any subset over the defaults and throws InvalidArgument naming a bad or
  // unknown field (or an algorithm a table cannot time).
  std::string toJson() const;
  static NetworkModel fromJson(const std::string& text, const std::string& origin);
  // The same from a file; `origin` names it in errors (e.g. "HVD_NETWORK_MODEL=/path").
  static NetworkModel fromFile(const std::string& path, const std::string& origin);
  // Throws InvalidArgument naming the first field out of range.
  void validate(const std::string& origin) const;
};

}  // namespace hvd::collectives
