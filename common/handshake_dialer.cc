#include "common/handshake_dialer.h"

#include <algorithm>

#include "common/asio_io.h"
#include "common/error.h"

namespace hvd::io {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr std::chrono::milliseconds kFirstPause{1};
constexpr std::chrono::milliseconds kLongestPause{100};

}  // namespace

// One dial, from the first connect to its end.
struct Dial {
  Dial(asio::io_context& io, std::size_t idIn)
      : socket(io), pause(io), deadlineTimer(io), id(idIn) {}
  tcp::socket socket;
  asio::steady_timer pause;  // between connect attempts
  asio::steady_timer deadlineTimer;
  std::size_t id;
  tcp::endpoint endpoint;
  std::vector<uint8_t> claim;
  Deadline deadline;
  std::string what;
  std::chrono::milliseconds nextPause = kFirstPause;
  std::string lastFailure;  // the last attempt's error, for a dial its deadline ends
  bool finished = false;
};

struct HandshakeDialer::State : std::enable_shared_from_this<State> {
  State(asio::io_context& ioIn, DialerOptions o, Done f)
      : io(ioIn), options(std::move(o)), onDone(std::move(f)) {}

  asio::io_context& io;
  DialerOptions options;
  Done onDone;
  std::vector<std::shared_ptr<Dial>> dials;  // by id
  std::size_t running = 0;
  bool stopped = false;

  std::string target(const Dial& d) const {
    return d.what + ": connect to " + d.endpoint.address().to_string() + ":" +
           std::to_string(d.endpoint.port());
  }

  void start(const std::shared_ptr<Dial>& d) {
    ++running;
    d->deadlineTimer.expires_at(d->deadline);
    d->deadlineTimer.async_wait([self = shared_from_this(), d](const error_code& e) {
      if (e || self->stopped || d->finished) return;
      std::string last = d->lastFailure.empty() ? "" : " (last attempt: " + d->lastFailure + ")";
      self->finish(d,
                   std::make_exception_ptr(TimeoutError(self->target(*d) + ": timed out" + last)));
    });
    connect(d);
  }

  void connect(const std::shared_ptr<Dial>& d) {
    error_code ec;
    if (d->socket.is_open()) d->socket.close(ec);
    d->socket.open(d->endpoint.protocol(), ec);
    if (ec) return finish(d, std::make_exception_ptr(IoError(target(*d) + ": " + ec.message())));
    setCloseOnExec(d->socket.native_handle());
    if (options.bufferBytes > 0) setBufferSizes(d->socket, options.bufferBytes);
    d->socket.async_connect(d->endpoint, [self = shared_from_this(), d](const error_code& e) {
      if (self->stopped || d->finished) return;
      self->onConnect(d, e);
    });
  }

  void onConnect(const std::shared_ptr<Dial>& d, const error_code& e) {
    if (e) {
      if (!retriableConnectError(e) || Clock::now() + d->nextPause >= d->deadline)
        return finish(d, std::make_exception_ptr(IoError(target(*d) + ": " + e.message())));
      d->lastFailure = e.message();
      error_code ignored;
      d->socket.close(ignored);
      d->pause.expires_after(d->nextPause);
      d->nextPause = std::min(d->nextPause * 2, kLongestPause);
      d->pause.async_wait([self = shared_from_this(), d](const error_code& w) {
        if (w || self->stopped || d->finished) return;
        self->connect(d);
      });
      return;
    }
    error_code ignored;
    d->socket.set_option(tcp::no_delay(true), ignored);
    asyncAuthenticateAsConnector(d->socket, options.secret, options.context, d->claim, d->what,
                                 [self = shared_from_this(), d](std::exception_ptr error) {
                                   if (self->stopped || d->finished) return;
                                   self->finish(d, std::move(error));
                                 });
  }

  void finish(const std::shared_ptr<Dial>& d, std::exception_ptr error) {
    d->finished = true;
    --running;
    d->pause.cancel();
    d->deadlineTimer.cancel();
    error_code ignored;
    if (error) d->socket.close(ignored);
    onDone(d->id, error ? tcp::socket(io) : std::move(d->socket), std::move(error));
  }

  void stop() {
    if (stopped) return;
    stopped = true;
    error_code ignored;
    for (auto& d : dials) {
      if (d->finished) continue;
      d->finished = true;
      d->pause.cancel();
      d->deadlineTimer.cancel();
      d->socket.close(ignored);
    }
    running = 0;
  }
};

HandshakeDialer::HandshakeDialer(asio::io_context& io, DialerOptions options, Done onDone)
    : state_(std::make_shared<State>(io, std::move(options), std::move(onDone))) {}

HandshakeDialer::~HandshakeDialer() { stop(); }

std::size_t HandshakeDialer::dial(const std::string& host, uint16_t port,
                                  std::vector<uint8_t> claim, Deadline deadline, std::string what) {
  HVD_ENFORCE(!state_->stopped, "HandshakeDialer::dial after stop()");
  auto address = resolveAddress(state_->io.get_executor(), host, port, what);
  auto d = std::make_shared<Dial>(state_->io, state_->dials.size());
  d->endpoint = tcp::endpoint(address, port);
  d->claim = std::move(claim);
  d->deadline = deadline;
  d->what = std::move(what);
  state_->dials.push_back(d);
  state_->start(d);
  return d->id;
}

void HandshakeDialer::stop() { state_->stop(); }

std::size_t HandshakeDialer::unfinished() const { return state_->running; }

}  // namespace hvd::io
