// Broadcast through real links: every algorithm (tree, pipelined chain, scatter-allgather), the
// cost model's pick, and the form staged by host, from every root and at sizes from empty to
// hundreds of segments. Checks inside the rank threads use HVD_ENFORCE (Catch2 is not
// thread-safe); runRanks rethrows the first failure on the main thread.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <vector>

#include "collectives/algorithms/broadcast.h"
#include "test/ranks/host_layouts.h"
#include "test/ranks/run_ranks.h"

using namespace hvd;
using namespace hvd::collectives;
using namespace hvd::test;

namespace {

constexpr std::size_t kSegmentBytes = 1024;  // small, to reach multi-segment paths

// Broadcasts `bytes` from every rank in turn and checks every byte on every rank.
void broadcastFromEveryRoot(Comm& comm, std::size_t bytes, const BroadcastOptions& options,
                            const char* what) {
  for (int root = 0; root < comm.size(); ++root) {
    auto want = [root](std::size_t i) { return static_cast<uint8_t>(i * 31 + root); };
    std::vector<uint8_t> buf(bytes, 0xEE);
    if (comm.rank() == root)
      for (std::size_t i = 0; i < bytes; ++i) buf[i] = want(i);
    broadcast(comm, buf.data(), bytes, root, options);
    for (std::size_t i = 0; i < bytes; ++i)
      HVD_ENFORCE(buf[i] == want(i), what, ", root ", root, ", ", bytes, " bytes: byte ", i,
                  " wrong on rank ", comm.rank());
  }
}

}  // namespace

TEST_CASE("broadcast from every root: tree, pipelined chain, scatter-allgather, the model's pick",
          "[broadcast]") {
  int n = GENERATE(1, 2, 3, 4, 7);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport));
  REQUIRE_NOTHROW(runRanks(
      n,
      [n](Comm& comm) {
        // Large enough for hundreds of 1 KiB segments; under the sanitizers a 3 MiB chain of 7
        // ranks came near the op timeout.
        const std::size_t large = kSanitized ? std::size_t{300} << 10 : std::size_t{3} << 20;
        // Left to a model of hosts of 2 ranks (the communicator spans hosts from 3 ranks), whose
        // pick changes with the size: with a slow NIC the chain of 1 KiB segments wins at the
        // large size, the tree at 1 byte.
        NetworkModel model;
        model.ranksPerHost = 2;
        model.interHost = {1e-6, 1e7};
        BroadcastOptions byModel{SIZE_MAX, kSegmentBytes};
        byModel.model = &model;
        if (n >= 3) {
          HVD_ENFORCE(
              chooseBroadcastAlgorithm(comm, 1, byModel) == BroadcastAlgorithm::BinomialTree,
              "the model should pick the tree for 1 byte");
          HVD_ENFORCE(
              chooseBroadcastAlgorithm(comm, large, byModel) == BroadcastAlgorithm::PipelinedChain,
              "the model should pick the chain for ", large, " bytes");
        }
        BroadcastOptions scatterAllgather{SIZE_MAX, kSegmentBytes};
        scatterAllgather.algorithm = BroadcastAlgorithm::ScatterAllgather;
        std::pair<BroadcastOptions, const char*> runs[] = {
            {BroadcastOptions{SIZE_MAX, kSegmentBytes}, "tree"},
            {BroadcastOptions{0, kSegmentBytes}, "chain"},
            {byModel, "the model's pick"},
            {scatterAllgather, "scatter-allgather"}};
        for (const auto& [options, what] : runs)
          for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4097}, large})
            broadcastFromEveryRoot(comm, bytes, options, what);
      },
      over(transport)));
}

TEST_CASE("broadcast staged by host where the model says, from every root", "[broadcast]") {
  Hosts hosts = GENERATE(Hosts{6, 3, false, Transport::Tcp}, Hosts{4, 2, true, Transport::Shm});
  INFO(hosts);
  // The slow NIC makes the staged form (one crossing per host) win the small sizes.
  NetworkModel model = slowNicModel(hosts.perHost);
  std::atomic<int> stagedSizes = 0;
  REQUIRE_NOTHROW(runRanks(
      hosts.ranks,
      [&](Comm& comm) {
        attachHosts(comm, hosts, Staged::ByModel);
        BroadcastOptions o{SIZE_MAX, kSegmentBytes};
        o.model = &model;
        for (std::size_t bytes :
             {std::size_t{0}, std::size_t{1}, std::size_t{4097}, std::size_t{1u << 20}}) {
          if (comm.rank() == 0) stagedSizes += runsHierarchicalBroadcast(comm, bytes, o);
          broadcastFromEveryRoot(comm, bytes, o, "staged broadcast");
        }
      },
      over(hosts.transport)));
  // 1 and 4097 bytes at least (1 MiB may go flat: scatter-allgather crosses in pieces).
  CHECK(stagedSizes >= 2);
}
