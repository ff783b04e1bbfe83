#include "common/handshake_listener.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>

#include "common/asio_io.h"
#include "common/auth.h"
#include "common/error.h"
#include "common/logging.h"
#include "common/open_files.h"

namespace hvd::io {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

// Failed handshakes logged at warning level per listener; the rest go to debug, so a flood of
// strangers cannot flood the job's output.
constexpr int kWarnedRejections = 10;
// How long accepting pauses when the process is out of descriptors.
constexpr std::chrono::milliseconds kDescriptorPause{100};
// Descriptors a listener leaves to its process (at most a quarter of ulimit -n).
constexpr rlim_t kDescriptorsKept = kOpenFilesKept;

bool outOfDescriptors(const error_code& ec) {
  if (ec.category() != boost::system::system_category()) return false;
  int e = ec.value();
  return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

std::string descriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return "unknown";
  return std::to_string(limit.rlim_cur);
}

// Why accepting must pause although accept() itself would still succeed, or "" when it need
// not. A listener takes one descriptor per connection, and strangers can open connections
// faster than handshakes time out; the listener's own process (hvdrun starting workers, a
// worker opening files) must still find descriptors, so the last ones are left to it. The
// kernel hands out the lowest free descriptor, so a duplicate's number counts the ones in use.
std::string descriptorsKeptForTheProcess(int anyDescriptor) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return "";
  int lowestFree = ::fcntl(anyDescriptor, F_DUPFD_CLOEXEC, 0);
  if (lowestFree < 0) return errno == EMFILE ? std::strerror(EMFILE) : "";
  ::close(lowestFree);
  rlim_t kept = std::min<rlim_t>(kDescriptorsKept, limit.rlim_cur / 4);
  if (static_cast<rlim_t>(lowestFree) + kept < limit.rlim_cur) return "";
  return detail::concat(lowestFree, " in use, the last ", kept,
                        " kept for the process's own files and pipes");
}

}  // namespace

// One accepted connection, from accept to authenticated or dropped.
struct Pending {
  Pending(tcp::socket s, asio::any_io_executor executor)
      : socket(std::move(s)), timer(std::move(executor)) {}
  tcp::socket socket;
  asio::steady_timer timer;
  std::string peer;
  auth::Nonce nonce{};
  std::array<uint8_t, auth::kMagic.size() + auth::kNonceBytes> hello{};
  std::vector<uint8_t> proofIn;  // nonce_c + proof + claim
  auth::Digest answer{};
  bool finished = false;
};

struct HandshakeListener::State : std::enable_shared_from_this<State> {
  State(tcp::acceptor& a, ListenerOptions o, Accepted f)
      : acceptor(a), options(std::move(o)), onAccepted(std::move(f)), pause(a.get_executor()) {}

  tcp::acceptor& acceptor;
  ListenerOptions options;
  Accepted onAccepted;
  asio::steady_timer pause;
  std::list<std::shared_ptr<Pending>> pending;  // oldest first
  bool stopped = false;
  bool starved = false;  // accepting paused: out of descriptors
  std::atomic<int> rejected{0};

  std::shared_ptr<spdlog::logger> log() const {
    return log::logger(options.logs.get(), options.subsystem);
  }

  void accept() {
    if (stopped) return;
    acceptor.async_accept([self = shared_from_this()](error_code ec, tcp::socket socket) {
      self->onAccept(ec, std::move(socket));
    });
  }

  void onAccept(const error_code& ec, tcp::socket socket) {
    if (stopped || ec == asio::error::operation_aborted) return;
    if (outOfDescriptors(ec)) return starve(ec.message());
    if (starved) {
      starved = false;
      log()->info("{}: file descriptors are free again, accepting connections", options.name);
    }
    if (!ec) {
      setCloseOnExec(socket.native_handle());
      if (pending.size() >= options.maxPending)
        fail(pending.front(), "evicted: " + std::to_string(pending.size()) +
                                  " connections were waiting to authenticate");
      begin(std::move(socket));
    } else {
      log()->debug("{}: accept: {}", options.name, ec.message());
    }
    acceptUnlessShort();
  }

  // Accepts the next connection, or pauses while the process is short of descriptors.
  void acceptUnlessShort() {
    if (stopped) return;
    std::string why = descriptorsKeptForTheProcess(acceptor.native_handle());
    if (!why.empty()) return starve(why);
    accept();
  }

  // Pauses accepting (new connections wait in the kernel's backlog) and looks again later; one
  // log line per pause, however long it lasts.
  void starve(const std::string& why) {
    if (!starved)
      log()->warn(
          "{}: out of file descriptors ({}; ulimit -n is {}), so new connections "
          "wait in the kernel until some are free; {} unauthenticated connections "
          "are pending and each closes within {} ms",
          options.name, why, descriptorLimit(), pending.size(), options.handshakeTimeout.count());
    starved = true;
    pause.expires_after(kDescriptorPause);
    pause.async_wait([self = shared_from_this()](const error_code& e) {
      if (!e) self->acceptUnlessShort();
    });
  }

  void begin(tcp::socket socket) {
    auto p = std::make_shared<Pending>(std::move(socket), acceptor.get_executor());
    error_code ignored;
    p->socket.set_option(tcp::no_delay(true), ignored);
    auto ep = p->socket.remote_endpoint(ignored);
    p->peer =
        ignored ? "an unknown peer" : ep.address().to_string() + ":" + std::to_string(ep.port());
    pending.push_back(p);
    auto self = shared_from_this();
    p->timer.expires_after(options.handshakeTimeout);
    p->timer.async_wait([self, p](const error_code& e) {
      if (e || self->stopped) return;
      self->fail(
          p, detail::concat("no complete handshake within ", self->options.handshakeTimeout.count(),
                            " ms (HVD_HANDSHAKE_TIMEOUT_SECONDS)"));
    });
    p->nonce = auth::randomNonce();
    std::copy(auth::kMagic.begin(), auth::kMagic.end(), p->hello.begin());
    std::copy(p->nonce.begin(), p->nonce.end(), p->hello.begin() + auth::kMagic.size());
    asio::async_write(p->socket, asio::buffer(p->hello), [self, p](error_code e, std::size_t) {
      if (self->stopped || p->finished) return;
      if (e) return self->fail(p, "handshake write: " + e.message());
      self->readProof(p);
    });
  }

  void readProof(const std::shared_ptr<Pending>& p) {
    p->proofIn.resize(auth::kNonceBytes + auth::kDigestBytes + options.claimBytes);
    auto self = shared_from_this();
    asio::async_read(p->socket, asio::buffer(p->proofIn), [self, p](error_code e, std::size_t n) {
      if (self->stopped || p->finished) return;
      if (e)
        return self->fail(p, detail::concat("closed or failed after ", n, " of ", p->proofIn.size(),
                                            " handshake bytes (", e.message(), ")"));
      self->checkProof(p);
    });
  }

  void checkProof(const std::shared_ptr<Pending>& p) {
    auth::Nonce theirs{};
    auth::Digest proof{};
    auto in = p->proofIn.begin();
    std::copy(in, in + auth::kNonceBytes, theirs.begin());
    std::copy(in + auth::kNonceBytes, in + auth::kNonceBytes + auth::kDigestBytes, proof.begin());
    std::string context = options.context;
    context.append(in + auth::kNonceBytes + auth::kDigestBytes, p->proofIn.end());
    if (!auth::digestsEqual(proof, auth::connectorProof(options.secret, p->nonce, theirs, context)))
      return fail(p,
                  "authentication failed: its proof does not match the job secret (or "
                  "the rank it claims)");
    p->answer = auth::acceptorProof(options.secret, p->nonce, theirs, context);
    auto self = shared_from_this();
    asio::async_write(p->socket, asio::buffer(p->answer), [self, p](error_code e, std::size_t) {
      if (self->stopped || p->finished) return;
      if (e) return self->fail(p, "handshake write: " + e.message());
      self->finish(p);
    });
  }

  void finish(const std::shared_ptr<Pending>& p) {
    p->finished = true;
    pending.remove(p);
    p->timer.cancel();
    std::vector<uint8_t> claim(p->proofIn.end() - static_cast<long>(options.claimBytes),
                               p->proofIn.end());
    onAccepted(std::move(p->socket), std::move(claim));
  }

  void fail(std::shared_ptr<Pending> p, const std::string& why) {
    if (p->finished) return;
    p->finished = true;
    pending.remove(p);
    p->timer.cancel();
    error_code ignored;
    p->socket.close(ignored);
    int n = ++rejected;
    if (n <= kWarnedRejections)
      log()->warn("{}: dropped the connection from {}: {}{}", options.name, p->peer, why,
                  n == kWarnedRejections ? " (further dropped connections are logged at debug "
                                           "level)"
                                         : "");
    else
      log()->debug("{}: dropped the connection from {}: {}", options.name, p->peer, why);
  }

  void stop() {
    if (stopped) return;
    stopped = true;
    error_code ignored;
    pause.cancel();
    acceptor.close(ignored);
    for (auto& p : pending) {
      p->finished = true;
      p->timer.cancel();
      p->socket.close(ignored);
    }
    pending.clear();
  }
};

HandshakeListener::HandshakeListener(tcp::acceptor& acceptor, ListenerOptions options,
                                     Accepted onAccepted)
    : state_(std::make_shared<State>(acceptor, std::move(options), std::move(onAccepted))) {
  setCloseOnExec(acceptor.native_handle());
}

HandshakeListener::~HandshakeListener() { stop(); }

void HandshakeListener::start() { state_->accept(); }

void HandshakeListener::stop() { state_->stop(); }

int HandshakeListener::rejected() const { return state_->rejected.load(); }

}  // namespace hvd::io
