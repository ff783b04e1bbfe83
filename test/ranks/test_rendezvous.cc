#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>

#include <csignal>
#include <fstream>
#include <thread>

#include "collectives/rendezvous/prefix_store.h"
#include "collectives/rendezvous/rank_table.h"
#include "collectives/rendezvous/rendezvous_server.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "common/asio_io.h"
#include "runtime/kernel_sharing.h"
#include "test/ranks/test_time.h"

using namespace hvd;
using namespace hvd::rendezvous;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {
Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

// Waits until the server has counted `n` rejected connections (it does so on its own thread).
bool rejectedReaches(const rendezvous::RendezvousServer& server, int n) {
  for (int i = 0; i < 200 && server.rejectedConnections() < n; ++i)
    std::this_thread::sleep_for(10ms);
  return server.rejectedConnections() >= n;
}
}  // namespace

TEST_CASE("the rendezvous server serves set, get, add and wait") {
  rendezvous::RendezvousServer server("127.0.0.1", "secret");
  TcpStoreClient a(server.address(), server.port(), "secret", 2s);
  TcpStoreClient b(server.address(), server.port(), "secret", 2s);
  a.set("k", bytes("v"));
  CHECK(b.get("k") == bytes("v"));
  CHECK_FALSE(b.get("absent").has_value());
  CHECK(a.add("counter", 2) == 2);
  CHECK(b.add("counter", 3) == 5);
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    a.set("late", bytes("x"));
  });
  b.wait({"k", "late"}, 5s);
  later.join();
  CHECK(b.waitGet("late", 1s) == bytes("x"));
}

TEST_CASE("the rendezvous server answers a multi-get in one request, through a prefix") {
  rendezvous::RendezvousServer server("127.0.0.1", "secret");
  TcpStoreClient client(server.address(), server.port(), "secret", 2s);
  PrefixStore scoped("job/1", client);
  scoped.set("a", bytes("1"));
  scoped.set("c", bytes(""));
  auto values = scoped.multiGet({"a", "b", "c"});
  REQUIRE(values.size() == 3);
  CHECK(values[0] == bytes("1"));
  CHECK_FALSE(values[1].has_value());
  CHECK(values[2] == bytes(""));
  CHECK(client.multiGet({}).empty());
}

TEST_CASE("a rendezvous wait that times out lists the missing keys") {
  rendezvous::RendezvousServer server("127.0.0.1", "secret");
  TcpStoreClient client(server.address(), server.port(), "secret", 2s);
  PrefixStore scoped("job/1", client);
  scoped.set("have", bytes("1"));
  try {
    scoped.wait({"have", "addr/2", "addr/3"}, 300ms);
    FAIL("wait returned");
  } catch (const StoreTimeout& e) {
    CHECK(e.missingKeys() == std::vector<std::string>{"addr/2", "addr/3"});
    CHECK_THAT(e.what(), Catch::Contains("addr/2, addr/3"));
  }
}

TEST_CASE("the rendezvous server rejects clients without the secret") {
  rendezvous::RendezvousServer server("127.0.0.1", "secret");
  REQUIRE_THROWS_WITH(TcpStoreClient(server.address(), server.port(), "guess", 2s),
                      Catch::Contains("authentication failed"));
  CHECK(rejectedReaches(server, 1));
  // The server keeps serving honest clients afterwards.
  TcpStoreClient ok(server.address(), server.port(), "secret", 2s);
  ok.set("a", bytes("b"));
  CHECK(ok.get("a") == bytes("b"));
}

TEST_CASE("the rendezvous server refuses an oversized frame from its header") {
  rendezvous::RendezvousServer server("127.0.0.1", "secret");
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  auto deadline = io::Clock::now() + 2s;
  io::connect(socket, server.address(), server.port(), deadline, "test");
  io::authenticateAsConnector(socket, "secret", protocol::kAuthContext, {}, deadline, "test");
  std::array<uint8_t, 4> header = {0x7f, 0xff, 0xff, 0xff};  // ~2 GiB announced
  asio::write(socket, asio::buffer(header));
  boost::system::error_code ec;
  std::array<uint8_t, 1> byte{};
  asio::read(socket, asio::buffer(byte), ec);
  CHECK(ec == asio::error::eof);
  CHECK(rejectedReaches(server, 1));
}

TEST_CASE("200 silent connections to the rendezvous delay no client, and each is dropped") {
  rendezvous::RendezvousServer server("127.0.0.1", "secret", 0, 1s);
  asio::io_context io;
  std::vector<asio::ip::tcp::socket> strangers;
  for (int i = 0; i < 200; ++i) {
    strangers.emplace_back(io);
    strangers.back().connect({asio::ip::make_address(server.address()), server.port()});
  }
  // Side by side with the strangers' handshakes (and evicting the oldest of them), an honest
  // client is served at once: a 500 ms connect timeout is plenty.
  TcpStoreClient client(server.address(), server.port(), "secret", 500ms);
  client.set("k", bytes("v"));
  CHECK(client.get("k") == bytes("v"));
  // Every stranger is evicted or times out.
  CHECK(rejectedReaches(server, 200));
}

namespace {
// The lowest descriptor number free in this process: how many are in use below it.
int lowestFreeDescriptor() {
  int fd = ::dup(0);
  if (fd >= 0) ::close(fd);
  return fd;
}

// A child process that opens `n` silent connections to 127.0.0.1 on the port it reads from
// `portPipe`, and holds them until it is killed. It is forked before the test starts any
// thread and makes only async-signal-safe calls.
pid_t forkSilentConnector(int portPipe, int n) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  uint16_t port = 0;
  if (::read(portPipe, &port, sizeof port) != sizeof port) ::_exit(2);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < n; ++i) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) ::_exit(3);
  }
  for (;;) ::pause();
}
}  // namespace

TEST_CASE("strangers flooding the rendezvous leave its process descriptors for pipes") {
  int portPipe[2];
  REQUIRE(::pipe(portPipe) == 0);
  pid_t strangers = forkSilentConnector(portPipe[0], 150);
  REQUIRE(strangers > 0);
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
  // 100 descriptors above those in use: the server could take them all before the fix.
  rlimit low = before;
  low.rlim_cur = static_cast<rlim_t>(lowestFreeDescriptor()) + 100;
  REQUIRE(low.rlim_cur <= before.rlim_max);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  struct Restore {
    rlimit limit;
    ~Restore() { ::setrlimit(RLIMIT_NOFILE, &limit); }
  } restore{before};
  int pipes = 0;
  {
    rendezvous::RendezvousServer server("127.0.0.1", "secret", 0, 2s);
    uint16_t port = server.port();
    REQUIRE(::write(portPipe[1], &port, sizeof port) == sizeof port);
    // The server accepts strangers until it keeps the last descriptors (a quarter of 100 or
    // so); their handshakes run for 2 s, so none is freed meanwhile.
    int kept = static_cast<int>(low.rlim_cur / 4);
    for (int i = 0; i < 100 && lowestFreeDescriptor() + kept > static_cast<int>(low.rlim_cur); ++i)
      std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(200ms);  // it would go on accepting if it were to
    INFO("lowest free descriptor " << lowestFreeDescriptor() << " of " << low.rlim_cur);
    CHECK(lowestFreeDescriptor() + kept - 1 <= static_cast<int>(low.rlim_cur));
    // hvdrun's pipes for its workers: five workers' stdout and stderr.
    std::vector<int> fds;
    for (; pipes < 10; ++pipes) {
      int p[2];
      if (::pipe(p) != 0) break;
      fds.insert(fds.end(), {p[0], p[1]});
    }
    for (int fd : fds) ::close(fd);
    ::kill(strangers, SIGKILL);
    ::waitpid(strangers, nullptr, 0);
    // Once the strangers are gone, an honest client is served.
    TcpStoreClient client(server.address(), server.port(), "secret", test::scaled(5s));
    client.set("k", bytes("v"));
    CHECK(client.get("k") == bytes("v"));
  }
  ::close(portPipe[0]);
  ::close(portPipe[1]);
  CHECK(pipes == 10);
}

TEST_CASE("a frame whose body stops arriving is dropped after the handshake timeout") {
  rendezvous::RendezvousServer server("127.0.0.1", "secret", 0, 300ms);
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  auto deadline = io::Clock::now() + 2s;
  io::connect(socket, server.address(), server.port(), deadline, "test");
  io::authenticateAsConnector(socket, "secret", protocol::kAuthContext, {}, deadline, "test");
  std::array<uint8_t, 14> partial = {0x00, 0xff, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  asio::write(socket, asio::buffer(partial));  // announces 16 MiB, sends 10 bytes
  auto started = io::Clock::now();
  boost::system::error_code ec;
  std::array<uint8_t, 1> byte{};
  asio::read(socket, asio::buffer(byte), ec);
  CHECK(ec == asio::error::eof);
  CHECK(io::Clock::now() - started < test::scaled(2s));
  CHECK(rejectedReaches(server, 1));
}

TEST_CASE("the rendezvous serves one more address on the same port once asked, not before") {
  rendezvous::RendezvousServer server("127.0.0.1", "secret");
  REQUIRE_THROWS_WITH(TcpStoreClient("127.0.0.2", server.port(), "secret", 200ms),
                      Catch::Contains("127.0.0.2"));
  server.listenAlso("127.0.0.2");
  server.listenAlso("127.0.0.2");  // already served: nothing to do
  TcpStoreClient a("127.0.0.2", server.port(), "secret", 2s);
  TcpStoreClient b("127.0.0.1", server.port(), "secret", 2s);
  a.set("k", bytes("v"));
  CHECK(b.get("k") == bytes("v"));
  CHECK_THROWS_WITH(server.listenAlso("192.0.2.1"), Catch::Contains("cannot bind 192.0.2.1:"));
}

TEST_CASE("ranks count the ranks on their kernel through the store, and a missing rank times out") {
  rendezvous::RendezvousServer server("127.0.0.1", "secret");
  // Five ranks: three on kernel a (host names differ: pods of one node), one on b, one that
  // cannot read its kernel's identity and keeps its host's count.
  const std::vector<std::string> kernels = {"a", "b", "a", "", "a"};
  std::vector<int> counted(kernels.size(), -1);
  std::vector<std::thread> ranks;
  for (std::size_t r = 0; r < kernels.size(); ++r)
    ranks.emplace_back([&, r] {
      TcpStoreClient client(server.address(), server.port(), "secret", 2s);
      counted[r] =
          runtime::ranksOnKernel(client, "job/j/epoch/0/kernel/", kernels[r], static_cast<int>(r),
                                 static_cast<int>(kernels.size()), 1, 5s);
    });
  for (auto& t : ranks) t.join();
  CHECK(counted == std::vector<int>{3, 1, 3, 1, 3});
  // A rank that never counts: the others' wait ends naming it.
  TcpStoreClient alone(server.address(), server.port(), "secret", 2s);
  try {
    runtime::ranksOnKernel(alone, "job/j/epoch/1/kernel/", "a", 0, 2, 1, 200ms);
    FAIL("the count waited for a rank that never came");
  } catch (const RankTableTimeout& e) {
    CHECK(e.missingRanks() == std::vector<int>{1});
    CHECK_THAT(e.what(), Catch::Contains("job/j/epoch/1/kernel/<rank> of ranks {1}"));
  }
}

TEST_CASE("this machine's kernel identity is its boot_id, or empty where unreadable") {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string expected;
  in >> expected;
  CHECK(runtime::kernelId() == expected);
}
