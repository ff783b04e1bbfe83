// A communicator: this rank, the world size, one Connection per peer, and the timeout every
// operation on it uses. Algorithms see only this (collectives/algorithms never include a
// transport implementation).
// Thread model: one thread uses a Comm at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectives/transport/connection.h"
#include "common/error.h"

namespace hvd::collectives {

class Comm {
 public:
  // connections[r] is the link to rank r; connections[rank] is null, and so is a pair the
  // device left unlinked (LinkShape). `progress` is the
  // transport's device, which the connections depend on (null for a single rank).
  Comm(int rank, int size, std::vector<std::shared_ptr<Connection>> connections,
       std::chrono::milliseconds timeout, std::shared_ptr<ProgressEngine> progress);
  ~Comm();  // closes the connections, unless this Comm is a subset of another

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  Deadline deadline() const { return coarseNow() + timeout_; }
  Connection& peer(int r);

  // Each collective takes the next sequence number; both sides agree because collectives run in
  // the same order on every rank. Tags built from it keep operations' messages apart.
  uint64_t nextSequence() { return sequence_++; }
  std::string describe() const;  // "rank 1/4"
  // A reusable scratch buffer of at least `bytes` (contents undefined), valid until the next
  // call; saves collectives an allocation per operation.
  std::byte* scratch(std::size_t bytes) { return scratch_.atLeast(bytes); }
  // A second reusable buffer, for a collective's whole-payload working copy while the ring
  // uses scratch() for its receive slots. Kept at the largest size asked for: a fresh
  // allocation of tens of MiB costs a page fault per 4 KiB page on every operation, which
  // about doubles a large reducescatter's time.
  std::byte* workspace(std::size_t bytes) { return workspace_.atLeast(bytes); }
  // The message size that suits this transport when a collective streams a large payload as a
  // pipeline of messages and is not told a size (algorithms/ring.h's segmentLimit). The default
  // is TCP's, whose few large system calls win; the shm device sets its own. Subsets keep it.
  std::size_t pipelineSegmentBytes() const { return pipelineSegmentBytes_; }
  void setPipelineSegmentBytes(std::size_t bytes) { pipelineSegmentBytes_ = bytes; }
  // Whether each peer this rank first exchanges data with takes memory of its own: shared
  // memory's rings (about 1 MiB a pair) are taken at a pair's first use, so every further peer
  // a collective reaches costs /dev/shm pages. TCP's sockets exist from the start. The shm
  // device sets it; subsets keep it.
  bool buffersPerPeer() const { return buffersPerPeer_; }
  void setBuffersPerPeer(bool perPeer) { buffersPerPeer_ = perPeer; }
  // The kind of link between its ranks, as the network model's measured tables name it: "tcp"
  // (the default, as above) or what the device sets ("shm", "sim"). Subsets keep it.
  const std::string& linkName() const { return linkName_; }
  void setLinkName(std::string name) { linkName_ = std::move(name); }
  // The transport's progress engine (null for a single rank), for waiting on several requests.
  ProgressEngine* progress() const { return progress_.get(); }
  // A communicator over some of this one's ranks (`ranks` sorted, unique, containing this rank;
  // the new rank is the index in `ranks`). It shares the connections, so it must be used by the
  // same thread, and operations on both must run in the same order on every member.
  std::unique_ptr<Comm> subset(const std::vector<int>& ranks) const;

  // The same ranks seen as hosts, for the hierarchical allreduce and allgather: `local` reaches
  // the other ranks of this rank's host (over shared memory where it could), `cross` the ranks
  // with the same local index on the other hosts; both are subsets of this communicator's ranks.
  // Set on a job's global communicator by the runtime, on every rank or on none (subsets never
  // have one), with the same flags everywhere.
  struct Hierarchy {
    std::unique_ptr<Comm> local;
    std::unique_ptr<Comm> cross;
    // hosts[h][i]: this communicator's rank that is local rank i on host h (each host's ranks
    // ascending, as many on every host).
    std::vector<std::vector<int>> hosts;
    bool allreduce = false;  // which collectives run in stages
    bool allgather = false;
    // Allreduce runs in stages where Auto's cost model predicts them faster than the best flat
    // algorithm, size by size (allreduce.h: runsHierarchicalAllreduce).
    bool allreduceByModel = false;
  };
  void setHierarchy(Hierarchy hierarchy);
  const Hierarchy* hierarchy() const { return hierarchy_.get(); }

 private:
  int rank_;
  int size_;
  std::vector<std::shared_ptr<Connection>> connections_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<ProgressEngine> progress_;
  bool ownsConnections_ = true;
  uint64_t sequence_ = 0;
  // A buffer that only grows, its contents left undefined.
  struct KeptBuffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t bytes = 0;
    std::byte* atLeast(std::size_t size);
  };
  KeptBuffer scratch_;
  KeptBuffer workspace_;
  std::size_t pipelineSegmentBytes_ = 512 * 1024;
  bool buffersPerPeer_ = false;
  std::string linkName_ = "tcp";
  std::unique_ptr<Hierarchy> hierarchy_;
};

}  // namespace hvd::collectives
