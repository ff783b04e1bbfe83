// The shared-memory transport at the message level: order and content when messages smaller and
// much larger than the ring mix and both directions are full at once; the fast paths of a small
// send and of a message already in the ring; the errors a tag mismatch,
// a peer that closed, a silent peer and a peer process that died give; wake(); and the
// collective fallback when one rank cannot use shared memory. Rings are 64 KiB here (4 KiB where
// a test wants many wraps), so the chunked and wrapping paths run on every test.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "collectives/rendezvous/rendezvous_server.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "test/ranks/run_ranks.h"

using namespace hvd;
using namespace hvd::collectives;
using test::bytesOf;
using test::messageOf;
using test::Milestone;
using test::pattern;
using test::RankOptions;
using test::Transport;

namespace {

using namespace std::chrono_literals;

RankOptions shmOptions(std::size_t ringBytes = 64 * 1024, WaitPolicy waits = {},
                       std::chrono::milliseconds opTimeout = test::kTestTimeout) {
  RankOptions o = test::over(Transport::Shm);
  o.shmRingBytes = ringBytes;
  o.waits = waits;
  o.opTimeout = opTimeout;
  return o;
}

// Sleeping at once, and the polling a directly called collective does.
const std::vector<WaitPolicy> kPolicies = {{}, {.spins = {.smallSpin = 30us, .largeSpin = 2000us}}};

// The /dev/shm names this process created.
std::vector<std::string> ownShmNames() {
  std::vector<std::string> names;
  std::string prefix = "hvd-" + std::to_string(getpid()) + "-";
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (auto* e = ::readdir(dir))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
    ::closedir(dir);
  }
  return names;
}

}  // namespace

TEST_CASE("shm: messages smaller and larger than the ring arrive in order and whole, both ways") {
  auto waits = GENERATE(from_range(kPolicies));
  std::size_t ringBytes = GENERATE(std::size_t{4096}, std::size_t{64 * 1024});
  INFO("ring " << ringBytes << " spin " << waits.spins.largeSpin.count());
  const std::vector<std::size_t> sizes = {0, 1, 15, 16, 17, 4095, 4096, 65536, 300001, 1 << 20, 3};
  test::runRanks(
      3,
      [&](Comm& comm) {
        // Every rank posts all its sends to both peers before any receive: the rings fill, and only
        // a wait that drives sends and receives on every link at once can finish.
        std::vector<std::vector<uint8_t>> out, in;
        std::vector<Request> requests;
        for (int peer = 0; peer < comm.size(); ++peer) {
          if (peer == comm.rank()) continue;
          for (std::size_t i = 0; i < sizes.size(); ++i) {
            out.push_back(pattern(comm.rank(), static_cast<int>(i), sizes[i]));
            requests.push_back(comm.peer(peer).isend(bytesOf(out.back()), i));
          }
        }
        out.reserve(out.size());
        in.reserve(2 * sizes.size());
        std::vector<std::pair<int, std::size_t>> expected;
        for (int peer = 0; peer < comm.size(); ++peer) {
          if (peer == comm.rank()) continue;
          for (std::size_t i = 0; i < sizes.size(); ++i) {
            in.emplace_back(sizes[i], 0xEE);
            requests.push_back(comm.peer(peer).irecv(bytesOf(in.back()), i));
            expected.emplace_back(peer, i);
          }
        }
        for (auto& r : requests) r.wait(comm.deadline());
        for (std::size_t k = 0; k < in.size(); ++k) {
          auto [peer, i] = expected[k];
          HVD_ENFORCE(in[k] == pattern(peer, static_cast<int>(i), sizes[i]), "message ", i,
                      " from rank ", peer, " wrong on rank ", comm.rank());
        }
      },
      shmOptions(ringBytes, waits));
}

TEST_CASE("shm: payload a lap old that looks like the next message's stamp is not taken for it") {
  // A message at ring position p is announced by a stamp p|3 in its first 8 bytes (the layout in
  // shm_connection.cc: stamp, 16-byte header, payload padded to 8). Every payload word here
  // holds the stamp a message one lap later would carry at that spot, and rank 1 polls each
  // message's slot before rank 0 writes it: a receiver that trusted what a slot held would
  // accept a lap-old word as a message (and read garbage), where the sender's zeroed slot says
  // "nothing yet".
  constexpr std::size_t kRing = 4096;
  const std::vector<std::size_t> sizes = {40, 104, 8, 200, 0, 13, 512, 24};
  auto paddedBytes = [](std::size_t length) { return (24 + length + 7) & ~std::size_t{7}; };
  test::runRanks(
      2,
      [&](Comm& comm) {
        std::vector<uint8_t> ack(1);
        uint64_t position = 0;
        for (int k = 0; k < 400; ++k) {
          std::size_t length = sizes[k % sizes.size()];
          std::vector<uint8_t> message(length);
          for (std::size_t at = 0; at < length; at += 8) {
            uint64_t fake = (position + 24 + at + kRing) | 3;
            std::memcpy(message.data() + at, &fake, std::min<std::size_t>(8, length - at));
          }
          position += paddedBytes(length);
          if (comm.rank() == 0) {
            comm.peer(1).irecv(bytesOf(ack), 1).wait(comm.deadline());
            comm.peer(1).isend(bytesOf(message), 2).wait(comm.deadline());
            continue;
          }
          std::vector<uint8_t> in(length, 0xEE);
          Request r = comm.peer(0).irecv(bytesOf(in), 2);
          HVD_ENFORCE(!r.test(), "message ", k, " received before it was sent");
          comm.peer(0).isend(bytesOf(ack), 1).wait(comm.deadline());
          r.wait(comm.deadline());
          HVD_ENFORCE(in == message, "message ", k, " arrived changed");
        }
      },
      shmOptions(kRing));
}

TEST_CASE("shm: a message of another size or tag fails the receive naming both") {
  auto errors = test::runEachRank(
      2,
      [](Comm& comm) {
        std::vector<uint8_t> v(comm.rank() == 0 ? 8 : 4);
        if (comm.rank() == 0)
          comm.peer(1).isend(bytesOf(v), 7).wait(comm.deadline());
        else
          comm.peer(0).irecv(bytesOf(v), 7).wait(comm.deadline());
      },
      shmOptions());
  CHECK(messageOf(errors[0]) == "");
  CHECK_THAT(messageOf(errors[1]), Catch::Contains("rank 1/2: recv from rank 0 (shm, pid") &&
                                       Catch::Contains("tag=0x7 4 bytes") &&
                                       Catch::Contains("peer sent tag=0x7 8 bytes"));
}

TEST_CASE("shm: a small send and a receive of a message already in the ring complete at once") {
  // The ranks are threads here, so a flag can say when rank 0's bytes are in the ring.
  std::atomic<bool> sent{false};
  auto bad = GENERATE(false, true);  // the message waiting in the ring has another size
  auto errors = test::runEachRank(
      2,
      [&](Comm& comm) {
        if (comm.rank() == 0) {
          std::vector<uint8_t> v = pattern(0, 1, bad ? 8 : 300);
          Request r = comm.peer(1).isend(bytesOf(v), 5);
          HVD_ENFORCE(r.test(), "a send that fits in a free ring is done when isend returns");
          std::fill(v.begin(), v.end(), 0);  // the caller may reuse its buffer at once
          sent = true;
          return;
        }
        while (!sent) std::this_thread::yield();
        std::vector<uint8_t> v(300, 0xEE);
        Request r = comm.peer(0).irecv(bytesOf(v), 5);
        if (!bad) HVD_ENFORCE(r.test(), "a message already in the ring is received by irecv");
        r.wait(comm.deadline());
        HVD_ENFORCE(v == pattern(0, 1, 300), "the message arrived whole");
      },
      shmOptions());
  CHECK(messageOf(errors[0]) == "");
  if (bad)
    CHECK_THAT(messageOf(errors[1]), Catch::Contains("recv from rank 0 (shm, pid") &&
                                         Catch::Contains("tag=0x5 300 bytes") &&
                                         Catch::Contains("peer sent tag=0x5 8 bytes"));
  else
    CHECK(messageOf(errors[1]) == "");
}

TEST_CASE("shm: a receive from a peer that left fails naming the peer, after its last bytes") {
  auto waits = GENERATE(from_range(kPolicies));
  auto errors = test::runEachRank(
      2,
      [](Comm& comm) {
        std::vector<uint8_t> v(4, 9);
        if (comm.rank() == 0) {  // sends one message and leaves, closing its links
          comm.peer(1).isend(bytesOf(v), 1).wait(comm.deadline());
          return;
        }
        std::this_thread::sleep_for(100ms);                       // rank 0 is gone by now
        comm.peer(0).irecv(bytesOf(v), 1).wait(comm.deadline());  // the bytes it left arrive
        comm.peer(0).irecv(bytesOf(v), 2).wait(comm.deadline());
      },
      shmOptions(64 * 1024, waits));
  CHECK(messageOf(errors[0]) == "");
  CHECK_THAT(messageOf(errors[1]), Catch::Contains("rank 1/2: recv from rank 0") &&
                                       Catch::Contains("tag=0x2") &&
                                       Catch::Contains("the peer closed its connection"));
}

TEST_CASE("shm: a receive from a silent peer times out naming it") {
  auto start = Clock::now();
  Milestone waited;  // rank 0's wait has ended
  auto errors = test::runEachRank(
      2,
      [&waited](Comm& comm) {
        std::vector<uint8_t> v(4);
        // Rank 1 stays connected until rank 0's wait has ended (a peer that left would end it
        // with "closed by peer" instead).
        if (comm.rank() == 0) {
          Milestone::EndOf end{waited};
          comm.peer(1).irecv(bytesOf(v), 9).wait(comm.deadline());
        } else {
          waited.await();
        }
      },
      shmOptions(64 * 1024, {}, 300ms));
  CHECK(Clock::now() - start < test::scaled(3s));
  CHECK_THAT(messageOf(errors[0]), Catch::Contains("rank 0/2: recv from rank 1") &&
                                       Catch::Contains("tag=0x9 4 bytes") &&
                                       Catch::Contains("timed out"));
}

TEST_CASE("shm: wake() from another thread ends a wait before its sleep slice would") {
  auto errors = test::runEachRank(
      2,
      [](Comm& comm) {
        std::vector<uint8_t> v(4), done(1);
        if (comm.rank() == 1) {  // stays connected until rank 0 is done
          comm.peer(0).irecv(bytesOf(done), 2).wait(comm.deadline());
          return;
        }
        auto recv = comm.peer(1).irecv(bytesOf(v), 1);  // rank 1 never sends it
        // Rank 0's wait sleeps on its doorbell; without the wake-up it would sleep a whole slice.
        // The best of five tries keeps a busy machine's preemptions out of the measure.
        auto best = Clock::duration::max();
        for (int i = 0; i < 5; ++i) {
          std::thread waker([&] {
            std::this_thread::sleep_for(20ms);
            comm.progress()->wake();
          });
          auto before = Clock::now();
          comm.progress()->progressUntil(Clock::now() + 5s, true);
          best = std::min(best, Clock::now() - before);
          waker.join();
        }
        HVD_ENFORCE(best < shm::ShmDevice::kSlice * 3 / 5,
                    "the wake-up did not end the wait (best ",
                    std::chrono::duration_cast<std::chrono::milliseconds>(best).count(), " ms)");
        HVD_ENFORCE(!recv.test(), "nothing was sent");
        comm.peer(1).isend(bytesOf(done), 2).wait(comm.deadline());
      },
      shmOptions());
  CHECK(messageOf(errors[0]) == "");
  CHECK(messageOf(errors[1]) == "");
}

TEST_CASE("shm: when one rank cannot set up shared memory, every rank says which and why") {
  rendezvous::InMemoryStore store;
  std::vector<std::string> messages(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      // Rank 2 uses rings of another size, so the others' segments are not what it expects.
      auto device = shm::ShmDevice::create({r == 2 ? 8192u : 4096u});
      try {
        device->connectAll(r, 3, store, 5s, 5s);
      } catch (const shm::ShmUnavailable& e) {
        messages[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK_THAT(messages[r], Catch::Contains("shared memory unavailable") &&
                                Catch::Contains("rank 2: shm: rank 0's segment") &&
                                Catch::Contains("HVD_SHM_BUFFER_BYTES"));
  }
  CHECK(ownShmNames().empty());
}

TEST_CASE("shm: segments leave no name in /dev/shm once connected") {
  test::runRanks(
      3,
      [](Comm& comm) {
        barrier(comm);  // every rank has connected
        HVD_ENFORCE(ownShmNames().empty(), "a segment name is still in /dev/shm");
      },
      shmOptions());
  CHECK(ownShmNames().empty());
}

TEST_CASE("shm: a receive from a peer process that died fails naming it, within a second") {
  int toChild[2];
  REQUIRE(::pipe(toChild) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Rank 1: connects, then dies without closing anything.
    ::close(toChild[1]);
    uint16_t port = 0;
    if (::read(toChild[0], &port, sizeof port) != sizeof port) ::_exit(2);
    try {
      rendezvous::TcpStoreClient store("127.0.0.1", port, "secret", 5s);
      auto device = shm::ShmDevice::create({});
      auto comm = device->connectAll(1, 2, store, 5s, 5s);
      ::raise(SIGKILL);
    } catch (...) {}
    ::_exit(3);
  }
  ::close(toChild[0]);
  rendezvous::RendezvousServer server("127.0.0.1", "secret");
  uint16_t port = server.port();
  REQUIRE(::write(toChild[1], &port, sizeof port) == sizeof port);
  ::close(toChild[1]);
  rendezvous::TcpStoreClient store("127.0.0.1", port, "secret", 5s);
  auto comm = shm::ShmDevice::create({})->connectAll(0, 2, store, 5s, 10s);
  std::vector<uint8_t> v(4);
  auto start = Clock::now();
  std::string message;
  try {
    comm->peer(1).irecv(bytesOf(v), 1).wait(comm->deadline());
  } catch (const IoError& e) {
    message = e.what();
  }
  auto took = Clock::now() - start;
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(took < test::scaled(1s));
  CHECK_THAT(message,
             Catch::Contains("rank 0/2: rank 1 (shm, pid " + std::to_string(child) + ") exited"));
}

TEST_CASE("shm and tcp communicators offer their own ring segment size, and subsets keep it") {
  for (auto [transport, expected] : {std::pair{Transport::Shm, std::size_t{128 * 1024}},
                                     std::pair{Transport::Tcp, std::size_t{512 * 1024}}}) {
    test::runRanks(
        3,
        [expected = expected](Comm& comm) {
          HVD_ENFORCE_EQ(comm.pipelineSegmentBytes(), expected);
          HVD_ENFORCE_EQ(comm.subset({0, comm.rank() == 2 ? 2 : 1})->pipelineSegmentBytes(),
                         expected);
        },
        test::over(transport));
  }
}

// Hidden from the parallel run (test/CMakeLists.txt runs it alone): a poll gives up where
// other processes crowd the core (common/spin.h), and this test counts the thread's sleeps.
TEST_CASE("shm and tcp: a wait on a large transfer polls while a caller is blocked, else sleeps",
          "[.][alone]") {
  // The receiver's wait for a 1 MiB message (sent 100 ms late) with a small-message spin longer
  // than that: while the blocked-callers count is above zero it polls through, so its thread
  // never sleeps (no voluntary context switch); at zero it sleeps at once.
  for (Transport transport : {Transport::Shm, Transport::Tcp}) {
    for (int blockedNow : {0, 1}) {
      INFO(test::nameOf(transport) << ", blocked callers " << blockedNow);
      auto blocked = std::make_shared<std::atomic<int>>(blockedNow);
      RankOptions options = test::over(transport);
      options.waits = {.spins = {.smallSpin = 5s, .largeSpin = 0us, .blockedCallers = blocked},
                       .mode = WaitMode::Blocking};
      auto sleepsOfOneWait = [&] {
        std::atomic<long> sleeps{-1};
        test::runRanks(
            2,
            [&](Comm& comm) {
              std::vector<uint8_t> message(1 << 20);
              if (comm.rank() == 0) {
                message = pattern(0, 0, message.size());
                std::this_thread::sleep_for(100ms);
                comm.peer(1).isend(bytesOf(message), 7).wait(comm.deadline());
                return;
              }
              rusage before{}, after{};
              ::getrusage(RUSAGE_THREAD, &before);
              comm.peer(0).irecv(bytesOf(message), 7).wait(comm.deadline());
              ::getrusage(RUSAGE_THREAD, &after);
              HVD_ENFORCE(message == pattern(0, 0, message.size()), "message arrived wrong");
              sleeps = after.ru_nvcsw - before.ru_nvcsw;
            },
            options);
        return sleeps.load();
      };
      // A page fault that waits for the address space's lock (the other rank's thread maps
      // memory at that moment) also counts as a voluntary switch, though the wait never slept:
      // a polling wait shows no switch in at least one of three tries, a sleeping one in none.
      long sleeps = sleepsOfOneWait();
      for (int retry = 0; blockedNow && sleeps != 0 && retry < 2; ++retry)
        sleeps = sleepsOfOneWait();
      // Under a sanitizer its runtime blocks the thread now and then by itself (page faults on
      // shadow memory while the other rank's thread holds the mm lock, allocator locks), so
      // only the ordinary builds can count on no sleep at all.
      if (blockedNow && !test::kSanitized) CHECK(sleeps == 0);
      if (!blockedNow) CHECK(sleeps >= 1);
    }
  }
}
