// The simulated transport: its clock against the network model's closed forms, its failures
// (a deadlock and a mismatch are reported, naming ranks, never hang), and the real algorithms
// run on it at thousands of ranks with their results checked.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "collectives/algorithms/allgather.h"
#include "collectives/algorithms/allreduce.h"
#include "collectives/algorithms/alltoall.h"
#include "collectives/algorithms/broadcast.h"
#include "collectives/algorithms/reducescatter.h"
#include "collectives/algorithms/ring.h"
#include "collectives/transport/sim/sim_world.h"
#include "test/support/elements.h"

using namespace hvd;
using namespace hvd::collectives;
using namespace hvd::collectives::sim;

namespace {

NetworkModel simpleModel(int ranksPerHost = 1) {
  NetworkModel m;
  m.interHost = {10e-6, 1e9};  // 10 us, 1 GB/s: round numbers for closed forms
  m.intraHost = {1e-6, 4e9};
  m.sameHostTcp = {2e-6, 2e9};
  m.hostMemoryBytesPerSecond = 100e9;
  m.reduceBytesPerSecond = 2e9;
  m.ranksPerHost = ranksPerHost;
  return m;
}

SimOptions with(NetworkModel m, bool moveData = true) {
  SimOptions o;
  o.model = m;
  o.moveData = moveData;
  return o;
}

}  // namespace

TEST_CASE("a message between hosts takes latency plus bytes over bandwidth", "[sim]") {
  SimWorld world(2, with(simpleModel()));
  std::vector<std::byte> buffer(1 << 20);
  SimRun run = world.run([&](Comm& comm) {
    if (comm.rank() == 0)
      comm.peer(1).isend({buffer.data(), buffer.size()}, 7).wait(comm.deadline());
    else
      comm.peer(0).irecv({buffer.data(), buffer.size()}, 7).wait(comm.deadline());
  });
  CHECK(run.finishSeconds[1] == Approx(10e-6 + (1 << 20) / 1e9));
  CHECK(run.finishSeconds[0] == Approx((1 << 20) / 1e9));  // the send is done once it has left
  CHECK(run.messages == 1);
  CHECK(run.bytes == (1u << 20));
}

TEST_CASE("a message from another host is copied through the receiving host's memory", "[sim]") {
  // Host memory slower than the NIC: with one copy per NIC byte the memory paces the message;
  // half a copy (RDMA) is paced by the NIC again, and no copy leaves memory out.
  constexpr std::size_t kBytes = 1000000;
  std::vector<std::byte> buffer(kBytes);
  for (auto [copies, seconds] : {std::pair{1.0, kBytes / 0.5e9}, std::pair{0.5, kBytes / 1e9},
                                 std::pair{0.0, kBytes / 1e9}}) {
    NetworkModel m = simpleModel();
    m.hostMemoryBytesPerSecond = 0.5e9;
    m.nicMemoryCopies = copies;
    SimWorld world(2, with(m));
    SimRun run = world.run([&](Comm& comm) {
      if (comm.rank() == 0)
        comm.peer(1).isend({buffer.data(), kBytes}, 7).wait(comm.deadline());
      else
        comm.peer(0).irecv({buffer.data(), kBytes}, 7).wait(comm.deadline());
    });
    INFO(copies << " copies");
    CHECK(run.finishSeconds[1] == Approx(10e-6 + seconds));
  }
  // The copy shares the receiving host's memory with its ranks' copies within it: rank 2 gets
  // 1 MB from rank 0 (host 0) while rank 3 copies 1 MB to rank 2 over shared memory, both
  // through host 1's memory (1 GB/s here; links 4 GB/s, NIC 1 GB/s).
  NetworkModel m = simpleModel(2);
  m.hostMemoryBytesPerSecond = 1e9;
  SimOptions options = with(m);
  options.hierarchicalAllreduce = true;
  SimWorld world(4, options);
  std::vector<std::vector<std::byte>> buffers(4, std::vector<std::byte>(2 * kBytes));
  SimRun run = world.run([&](Comm& comm) {
    auto& b = buffers[comm.rank()];
    if (comm.rank() == 0) comm.peer(2).isend({b.data(), kBytes}, 1).wait(comm.deadline());
    if (comm.rank() == 3)
      comm.hierarchy()->local->peer(0).isend({b.data(), kBytes}, 2).wait(comm.deadline());
    if (comm.rank() == 2) {
      Request across = comm.peer(0).irecv({b.data(), kBytes}, 1);
      Request within = comm.hierarchy()->local->peer(1).irecv({b.data() + kBytes, kBytes}, 2);
      across.wait(comm.deadline());
      within.wait(comm.deadline());
    }
  });
  CHECK(run.finishSeconds[2] == Approx(10e-6 + 2 * kBytes / 1e9).epsilon(0.01));
}

TEST_CASE("nic_memory_copies is read from and written to a model's JSON, and checked", "[sim]") {
  NetworkModel m = NetworkModel::fromJson(R"({"nic_memory_copies": 0.5})", "test");
  CHECK(m.nicMemoryCopies == 0.5);
  CHECK(NetworkModel::fromJson(m.toJson(), "again").nicMemoryCopies == 0.5);
  CHECK(NetworkModel{}.nicMemoryCopies == 1.0);
  CHECK_THROWS_WITH(NetworkModel::fromJson(R"({"nic_memory_copies": -1})", "model.json"),
                    Catch::Contains("model.json") && Catch::Contains("nic_memory_copies"));
  // JSON cannot carry an infinity; a model built in code is checked as well.
  NetworkModel infinite;
  infinite.nicMemoryCopies = INFINITY;
  CHECK_THROWS_WITH(infinite.validate("built"), Catch::Contains("nic_memory_copies"));
}

TEST_CASE(
    "ranks of one host share its NIC; within a host they use TCP, or shared memory "
    "when staged",
    "[sim]") {
  // Ranks 0, 1 on host 0 both send 1 MB to ranks 2, 3 on host 1: the NIC carries them one after
  // the other. Rank 0 -> 1 within the host is not held up by the NIC.
  SimOptions options = with(simpleModel(2));
  options.hierarchicalAllreduce = true;
  SimWorld world(4, options);
  constexpr std::size_t kBytes = 1000000;
  std::vector<std::vector<std::byte>> buffers(4, std::vector<std::byte>(kBytes));
  SimRun run = world.run([&](Comm& comm) {
    auto& b = buffers[comm.rank()];
    if (comm.rank() < 2)
      comm.peer(comm.rank() + 2).isend({b.data(), kBytes}, 1).wait(comm.deadline());
    else
      comm.peer(comm.rank() - 2).irecv({b.data(), kBytes}, 1).wait(comm.deadline());
  });
  double one = kBytes / 1e9;
  CHECK(std::min(run.finishSeconds[2], run.finishSeconds[3]) == Approx(10e-6 + one));
  CHECK(std::max(run.finishSeconds[2], run.finishSeconds[3]) == Approx(10e-6 + 2 * one));

  SimRun local = world.run([&](Comm& comm) {
    auto& b = buffers[comm.rank()];
    if (comm.rank() == 0) comm.peer(1).isend({b.data(), kBytes}, 2).wait(comm.deadline());
    if (comm.rank() == 1) comm.peer(0).irecv({b.data(), kBytes}, 2).wait(comm.deadline());
  });
  // On the world's communicator, which spans both hosts, ranks of one host talk over TCP...
  CHECK(local.finishSeconds[1] == Approx(2e-6 + kBytes / 2e9));
  // ...and on the hierarchy's communicator within the host, over shared memory.
  SimRun staged = world.run([&](Comm& comm) {
    auto& b = buffers[comm.rank()];
    Comm& host = *comm.hierarchy()->local;
    if (comm.rank() == 0) host.peer(1).isend({b.data(), kBytes}, 3).wait(comm.deadline());
    if (comm.rank() == 1) host.peer(0).irecv({b.data(), kBytes}, 3).wait(comm.deadline());
  });
  CHECK(staged.finishSeconds[1] == Approx(1e-6 + kBytes / 4e9));
}

TEST_CASE("the bytes arrive, and reductions are charged at the model's rate", "[sim]") {
  // Two ranks on two hosts, recursive doubling: one exchange, then one reduction of the buffer.
  SimWorld world(2, with(simpleModel()));
  constexpr std::size_t kCount = 1000;
  std::vector<std::vector<float>> data(2, std::vector<float>(kCount));
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < kCount; ++i) data[r][i] = static_cast<float>(r * 1000 + i);
  SimRun run = world.run([&](Comm& comm) {
    auto& d = data[comm.rank()];
    allreduce(comm, d.data(), d.data(), kCount, DType::Float32, ReduceOp::Sum);
  });
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < kCount; ++i)
      REQUIRE(data[r][i] == static_cast<float>(1000 + 2 * i));
  double bytes = kCount * 4;
  CHECK(run.seconds == Approx(10e-6 + bytes / 1e9 + bytes / 2e9));
}

TEST_CASE("a receive that no rank will ever match is a simulated deadlock, named", "[sim]") {
  SimWorld world(3, with(simpleModel()));
  std::vector<std::byte> b(16);
  try {
    world.run([&](Comm& comm) {
      if (comm.rank() == 0) comm.peer(2).irecv({b.data(), 16}, 5).wait(comm.deadline());
    });
    FAIL("the run returned");
  } catch (const TimeoutError& e) {
    std::string what = e.what();
    INFO(what);
    CHECK(what.find("simulated deadlock") != std::string::npos);
    CHECK(what.find("rank 0 waits for rank 2 (tag=0x5, 16 bytes)") != std::string::npos);
  }
}

TEST_CASE("a failing rank is reported, not the deadlock it leaves behind", "[sim]") {
  SimWorld world(4, with(simpleModel()));
  std::vector<float> data(64, 1.0f);
  try {
    world.run([&](Comm& comm) {
      if (comm.rank() == 3) throw InvalidArgument("rank 3: bad tensor 'grad/w'");
      std::vector<float> mine = data;
      allreduce(comm, mine.data(), mine.data(), mine.size(), DType::Float32, ReduceOp::Sum);
    });
    FAIL("the run returned");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()) == "rank 3: bad tensor 'grad/w'");
  }
}

TEST_CASE("a message of another size than its receive fails that receive", "[sim]") {
  SimWorld world(2, with(simpleModel()));
  std::vector<std::byte> b(16);
  try {
    world.run([&](Comm& comm) {
      if (comm.rank() == 0)
        comm.peer(1).isend({b.data(), 8}, 9).wait(comm.deadline());
      else
        comm.peer(0).irecv({b.data(), 16}, 9).wait(comm.deadline());
    });
    FAIL("the run returned");
  } catch (const InternalError& e) {
    std::string what = e.what();
    INFO(what);
    CHECK(what.find("rank 1/2: recv from rank 0") != std::string::npos);
    CHECK(what.find("sent tag=0x9 8 bytes") != std::string::npos);
  }
}

namespace {

// Every rank's int32 allreduce of `count` elements on `world`, checked.
void checkAllreduce(SimWorld& world, std::size_t count, const AllreduceOptions& options,
                    const char* algorithm) {
  int n = world.size();
  std::vector<std::vector<int32_t>> data(n, std::vector<int32_t>(count));
  world.run([&](Comm& comm) {
    auto& d = data[comm.rank()];
    for (std::size_t i = 0; i < count; ++i) d[i] = comm.rank() % 7 + static_cast<int32_t>(i);
    allreduce(comm, d.data(), d.data(), count, DType::Int32, ReduceOp::Sum, options);
  });
  int32_t cycles = 0;
  for (int r = 0; r < n; ++r) cycles += r % 7;
  std::size_t wrong = 0;
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i)
      wrong += data[r][i] != cycles + static_cast<int32_t>(i) * n;
  INFO(algorithm << ", " << n << " ranks, count " << count);
  REQUIRE(wrong == 0);
}

// Every rank's allgather of blocks of 0 to 3 int32s on `world` by auto's pick, which for blocks
// this small is Bruck's; checked.
void checkBruckAllgather(SimWorld& world) {
  int n = world.size();
  auto blockOf = [](int r) { return static_cast<std::size_t>(r % 4); };
  std::vector<std::size_t> blockBytes;
  for (int r = 0; r < n; ++r) blockBytes.push_back(4 * blockOf(r));
  std::size_t total = std::accumulate(blockBytes.begin(), blockBytes.end(), std::size_t{0});
  REQUIRE(chooseFlatAllgather(n, total) == AllgatherAlgorithm::Bruck);
  std::vector<std::vector<int32_t>> gathered(n);
  world.run([&](Comm& comm) {
    std::vector<int32_t> mine(blockOf(comm.rank()), comm.rank());
    gathered[comm.rank()].assign(total / 4, -1);
    allgatherv(comm, mine.data(), gathered[comm.rank()].data(), blockBytes);
  });
  std::vector<int32_t> want;
  for (int r = 0; r < n; ++r) want.insert(want.end(), blockOf(r), r);
  std::size_t wrongRanks = 0;
  for (auto& g : gathered) wrongRanks += g != want;
  INFO(n << " ranks");
  REQUIRE(wrongRanks == 0);
}

}  // namespace

// The ring's 2(n-1) steps make 33 million messages at 4,096 ranks (over a minute here), so the
// ring-based collectives are checked at 1,024 and the logarithmic ones at 4,096.
TEST_CASE("the real collectives give checked results on 4,096 simulated ranks", "[sim][scale]") {
  // 4,096 is a power of two; 4,000 makes Rabenseifner and recursive doubling fold.
  constexpr int kRanks = 4096;
  SimWorld world(kRanks, with(simpleModel(8)));
  AllreduceOptions doubling;
  doubling.ringThresholdBytes = SIZE_MAX;
  for (std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{5000}})
    checkAllreduce(world, count, doubling, "recursive doubling");
  AllreduceOptions rabenseifner;
  rabenseifner.algorithm = AllreduceAlgorithm::Rabenseifner;
  for (std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{5000}})
    checkAllreduce(world, count, rabenseifner, "rabenseifner");
  SimWorld folding(4000, with(simpleModel(8)));
  for (std::size_t count : {std::size_t{37}, std::size_t{5000}}) {
    checkAllreduce(folding, count, doubling, "recursive doubling");
    checkAllreduce(folding, count, rabenseifner, "rabenseifner");
  }
  checkBruckAllgather(world);
  checkBruckAllgather(folding);  // a last round shorter than the others
  std::vector<std::vector<int64_t>> buffers(kRanks);
  world.run([&](Comm& comm) {
    auto& b = buffers[comm.rank()];
    b.assign(3, comm.rank() == 1234 ? 42 : -1);
    broadcast(comm, b.data(), b.size() * 8, 1234);
  });
  for (auto& b : buffers) REQUIRE(b == std::vector<int64_t>{42, 42, 42});
}

TEST_CASE("the ring collectives give checked results on 1,024 simulated ranks", "[sim][scale]") {
  constexpr int kRanks = 1024;
  SimWorld world(kRanks, with(simpleModel(8)));
  AllreduceOptions ring;
  ring.ringThresholdBytes = 0;
  for (std::size_t count : {std::size_t{37}, std::size_t{5000}})
    checkAllreduce(world, count, ring, "ring");
  std::vector<std::vector<int32_t>> gathered(kRanks);
  world.run([&](Comm& comm) {
    int32_t mine = comm.rank() * 3;
    auto& out = gathered[comm.rank()];
    out.assign(kRanks, -1);
    allgatherv(comm, &mine, out.data(), std::vector<std::size_t>(kRanks, 4), kAllgatherSegmentBytes,
               AllgatherAlgorithm::Ring);
  });
  std::size_t wrong = 0;
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < kRanks; ++i) wrong += gathered[r][i] != i * 3;
  REQUIRE(wrong == 0);
  std::vector<int32_t> scattered(kRanks, -1);
  world.run([&](Comm& comm) {
    std::vector<int32_t> in(kRanks);
    std::iota(in.begin(), in.end(), 0);
    reducescatter(comm, in.data(), &scattered[comm.rank()], evenBlocks(kRanks, kRanks),
                  DType::Int32, ReduceOp::Sum);
  });
  for (int r = 0; r < kRanks; ++r) wrong += scattered[r] != r * kRanks;
  REQUIRE(wrong == 0);
  // Alltoall: rank r sends r * 10000 + p to each p.
  std::vector<std::vector<int32_t>> received(kRanks, std::vector<int32_t>(kRanks, -1));
  world.run([&](Comm& comm) {
    std::vector<int32_t> out(kRanks);
    for (int p = 0; p < kRanks; ++p) out[p] = comm.rank() * 10000 + p;
    std::vector<std::size_t> each(kRanks, 4);
    alltoallv(comm, out.data(), each, received[comm.rank()].data(), each);
  });
  for (int r = 0; r < kRanks; ++r)
    for (int p = 0; p < kRanks; ++p) wrong += received[r][p] != p * 10000 + r;
  REQUIRE(wrong == 0);
}

TEST_CASE("a timing-only run moves no bytes and gives the same clock", "[sim]") {
  // 64 ranks, 8 per host, ring allreduce of 1 MiB: the data run and the timing-only run share
  // every decision, so their virtual times are equal to the last bit.
  constexpr int kRanks = 64;
  constexpr std::size_t kCount = 1 << 18;
  AllreduceOptions ring;
  ring.ringThresholdBytes = 0;
  double seconds[2];
  for (bool moveData : {true, false}) {
    SimWorld world(kRanks, with(simpleModel(8), moveData));
    std::vector<float> shared(kCount, 1.0f);  // timing only: one buffer for every rank
    std::vector<std::vector<float>> own(moveData ? kRanks : 0, std::vector<float>(kCount, 1.0f));
    SimRun run = world.run([&](Comm& comm) {
      float* d = moveData ? own[comm.rank()].data() : shared.data();
      allreduce(comm, d, d, kCount, DType::Float32, ReduceOp::Sum, ring);
    });
    seconds[moveData] = run.seconds;
    if (moveData)
      for (auto& d : own) REQUIRE(d[kCount - 1] == static_cast<float>(kRanks));  // 64 checks
    else
      CHECK(shared[0] == 1.0f);  // untouched
  }
  CHECK(seconds[0] == seconds[1]);
  CHECK(seconds[0] > 0);
}
