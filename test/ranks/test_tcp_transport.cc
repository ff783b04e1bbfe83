// The TCP transport at the message level, in both wait modes and with polling waits: order and
// content when small (direct) and large (Asio) messages mix on one link, sends the socket cannot
// take at once, waits that must drive both kinds, and the errors a broken stream, a dead peer
// and a silent peer give.
#include <catch2/catch.hpp>

#include <numeric>

#include "test/ranks/run_ranks.h"

using namespace hvd;
using namespace hvd::collectives;
using test::bytesOf;
using test::messageOf;
using test::Milestone;
using test::pattern;
using test::RankOptions;

namespace {

using namespace std::chrono_literals;

// Sleeping waits of both kinds, and the polling a data link's waits do (for small messages, and
// for large ones when collectives are called directly).
const std::vector<WaitPolicy> kPolicies = {
    {.mode = WaitMode::Interruptible},
    {.mode = WaitMode::Blocking},
    {.spins = {.smallSpin = 30us, .largeSpin = 2000us}, .mode = WaitMode::Blocking},
};

}  // namespace

TEST_CASE("small and large messages mixed on one link arrive in order and whole") {
  auto waits = GENERATE(from_range(kPolicies));
  // Sizes around the direct path's limit, empty ones, and megabytes, in both directions at once;
  // every request is posted before any wait, and the waits run in reverse order.
  const std::vector<std::size_t> sizes = {
      4, 0, kLatencyBoundBytes, 3 << 20, 1000, kLatencyBoundBytes + 1, 17, 1 << 20, 65535, 0, 8};
  test::runRanks(
      2,
      [&](Comm& comm) {
        int peer = 1 - comm.rank();
        std::vector<std::vector<uint8_t>> out, in;
        std::vector<Request> requests;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          out.push_back(pattern(comm.rank(), static_cast<int>(i), sizes[i]));
          in.emplace_back(sizes[i]);
        }
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          requests.push_back(comm.peer(peer).isend(bytesOf(out[i]), 100 + i));
          requests.push_back(comm.peer(peer).irecv(bytesOf(in[i]), 100 + i));
        }
        for (auto it = requests.rbegin(); it != requests.rend(); ++it) it->wait(comm.deadline());
        for (std::size_t i = 0; i < sizes.size(); ++i)
          HVD_ENFORCE(in[i] == pattern(peer, static_cast<int>(i), sizes[i]), "message ", i, " (",
                      sizes[i], " bytes) arrived wrong");
      },
      RankOptions{"s", waits});
}

TEST_CASE("small sends the socket cannot take at once finish when the peer reads") {
  auto waits = GENERATE(from_range(kPolicies));
  // 400 messages of 64 KiB (25 MiB) overflow the socket buffers, so later sends find the socket
  // full (or take part of a message) and must be finished by the transport; the receiver starts
  // late, and its reads of each message may come in pieces.
  const int count = 400;
  test::runRanks(
      2,
      [&](Comm& comm) {
        std::vector<std::vector<uint8_t>> buffers;
        std::vector<Request> requests;
        if (comm.rank() == 0) {
          for (int i = 0; i < count; ++i) buffers.push_back(pattern(0, i, kLatencyBoundBytes));
          for (int i = 0; i < count; ++i)
            requests.push_back(comm.peer(1).isend(bytesOf(buffers[i]), i));
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          buffers.assign(count, std::vector<uint8_t>(kLatencyBoundBytes));
          for (int i = 0; i < count; ++i)
            requests.push_back(comm.peer(0).irecv(bytesOf(buffers[i]), i));
        }
        for (auto& r : requests) r.wait(comm.deadline());
        if (comm.rank() == 1)
          for (int i = 0; i < count; ++i)
            HVD_ENFORCE(buffers[i] == pattern(0, i, kLatencyBoundBytes), "message ", i, " wrong");
      },
      RankOptions{"s", waits});
}

TEST_CASE("a wait on a small receive also drives a large send on another link") {
  auto waits = GENERATE(from_range(kPolicies));
  // Rank 0's wait for rank 2's 4 bytes must keep its 8 MiB send to rank 1 moving: rank 2 sends
  // only after rank 1 has received everything.
  test::runRanks(
      3,
      [](Comm& comm) {
        const std::size_t big = 8 << 20;
        std::vector<uint8_t> payload(big), small(4);
        if (comm.rank() == 0) {
          payload = pattern(0, 0, big);
          auto send = comm.peer(1).isend(bytesOf(payload), 1);
          auto recv = comm.peer(2).irecv(bytesOf(small), 2);
          recv.wait(comm.deadline());
          send.wait(comm.deadline());
          HVD_ENFORCE(small == pattern(2, 2, 4), "small message wrong");
        } else if (comm.rank() == 1) {
          comm.peer(0).irecv(bytesOf(payload), 1).wait(comm.deadline());
          HVD_ENFORCE(payload == pattern(0, 0, big), "large message wrong");
          std::vector<uint8_t> go(1, 1);
          comm.peer(2).isend(bytesOf(go), 3).wait(comm.deadline());
        } else {
          std::vector<uint8_t> go(1);
          comm.peer(1).irecv(bytesOf(go), 3).wait(comm.deadline());
          small = pattern(2, 2, 4);
          comm.peer(0).isend(bytesOf(small), 2).wait(comm.deadline());
        }
      },
      RankOptions{"s", waits});
}

TEST_CASE("a message of another size or tag fails the receive naming both") {
  auto waits = GENERATE(from_range(kPolicies));
  auto errors = test::runEachRank(
      2,
      [](Comm& comm) {
        std::vector<uint8_t> v(comm.rank() == 0 ? 8 : 4);
        if (comm.rank() == 0)
          comm.peer(1).isend(bytesOf(v), 7).wait(comm.deadline());
        else
          comm.peer(0).irecv(bytesOf(v), 7).wait(comm.deadline());
      },
      RankOptions{"s", waits});
  CHECK(messageOf(errors[0]) == "");
  CHECK_THAT(messageOf(errors[1]), Catch::Contains("rank 1/2: recv from rank 0") &&
                                       Catch::Contains("tag=0x7 4 bytes") &&
                                       Catch::Contains("peer sent tag=0x7 8 bytes instead"));
}

TEST_CASE("a small receive from a peer that left fails naming the peer") {
  auto waits = GENERATE(from_range(kPolicies));
  auto errors = test::runEachRank(
      2,
      [](Comm& comm) {
        if (comm.rank() == 0) return;  // leaves, closing its links
        std::vector<uint8_t> v(4);
        comm.peer(0).irecv(bytesOf(v), 1).wait(comm.deadline());
      },
      RankOptions{"s", waits});
  CHECK(messageOf(errors[0]) == "");
  CHECK_THAT(messageOf(errors[1]),
             Catch::Contains("rank 1/2: recv from rank 0") && Catch::Contains("closed by peer"));
}

TEST_CASE("a small receive from a silent peer times out naming it") {
  auto waits = GENERATE(from_range(kPolicies));
  auto start = Clock::now();
  Milestone waited;  // rank 0's wait has ended
  auto errors = test::runEachRank(
      2,
      [&waited](Comm& comm) {
        std::vector<uint8_t> v(4);
        // Rank 0 waits for a message rank 1 never sends; rank 1 stays connected until that wait
        // has ended (a peer that left would end it with "closed by peer" instead).
        if (comm.rank() == 0) {
          Milestone::EndOf end{waited};
          comm.peer(1).irecv(bytesOf(v), 9).wait(comm.deadline());
        } else {
          waited.await();
        }
      },
      RankOptions{"s", waits, std::chrono::milliseconds(300)});
  CHECK(Clock::now() - start < test::scaled(std::chrono::seconds(3)));
  CHECK_THAT(messageOf(errors[0]), Catch::Contains("rank 0/2: recv from rank 1") &&
                                       Catch::Contains("tag=0x9 4 bytes") &&
                                       Catch::Contains("timed out"));
}

TEST_CASE("wake() from another thread ends a wait on a small receive") {
  auto waits = GENERATE(from_range(kPolicies));
  test::runRanks(
      2,
      [](Comm& comm) {
        std::vector<uint8_t> v(4);
        if (comm.rank() == 1) {
          // Rank 1 sends only after rank 0 has been woken out of its wait; the wait returns
          // early (wake), and the request is still pending.
          std::vector<uint8_t> go(1);
          comm.peer(0).irecv(bytesOf(go), 2).wait(comm.deadline());
          comm.peer(0).isend(bytesOf(v), 1).wait(comm.deadline());
          return;
        }
        auto recv = comm.peer(1).irecv(bytesOf(v), 1);
        std::thread waker([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          comm.progress()->wake();
        });
        auto before = Clock::now();
        comm.progress()->progressUntil(Clock::now() + std::chrono::seconds(5), true);
        waker.join();
        HVD_ENFORCE(Clock::now() - before < test::scaled(std::chrono::seconds(2)),
                    "the wake-up did not end the wait");
        HVD_ENFORCE(!recv.test(), "nothing was sent yet");
        std::vector<uint8_t> go(1, 1);
        comm.peer(1).isend(bytesOf(go), 2).wait(comm.deadline());
        recv.wait(comm.deadline());
      },
      RankOptions{"s", waits});
}
