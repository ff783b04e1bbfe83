#include "collectives/rendezvous/tcp_store_client.h"

#include "common/asio_io.h"

namespace hvd::rendezvous {

using Clock = std::chrono::steady_clock;

namespace {
constexpr int kHandshakeAttempts = 3;
}

TcpStoreClient::TcpStoreClient(const std::string& host, uint16_t port, const std::string& secret,
                               std::chrono::milliseconds connectTimeout,
                               std::chrono::milliseconds requestTimeout)
    : server_(host + ":" + std::to_string(port)), requestTimeout_(requestTimeout) {
  auto deadline = Clock::now() + connectTimeout;
  std::string what = "rendezvous server " + server_;
  // The server evicts the oldest unauthenticated connection when too many are pending (a
  // flood of strangers), so a dropped handshake is tried again, a few times.
  for (int attempt = 1;; ++attempt) {
    try {
      io::connect(socket_, host, port, deadline, what);
      io::authenticateAsConnector(socket_, secret, protocol::kAuthContext, {}, deadline, what);
      return;
    } catch (const IoError& e) {
      if (attempt == kHandshakeAttempts || Clock::now() >= deadline) throw;
    }
  }
}

protocol::Response TcpStoreClient::call(const protocol::Request& request,
                                        std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto deadline = Clock::now() + timeout;
  std::string what = "rendezvous server " + server_;
  io::writeFrame(socket_, protocol::encode(request), deadline, what);
  auto response = protocol::decodeResponse(io::readFrame(socket_, deadline, what), server_);
  if (!response.ok && response.missing.empty())
    throw InvalidArgument("rendezvous server " + server_ + ": " + response.error);
  return response;
}

void TcpStoreClient::set(const std::string& key, const Bytes& value) {
  protocol::Request r;
  r.op = protocol::Op::Set;
  r.keys = {key};
  r.value = value;
  call(r, requestTimeout_);
}

std::optional<Bytes> TcpStoreClient::get(const std::string& key) {
  protocol::Request r;
  r.op = protocol::Op::Get;
  r.keys = {key};
  auto response = call(r, requestTimeout_);
  if (!response.found) return std::nullopt;
  return response.value;
}

std::vector<std::optional<Bytes>> TcpStoreClient::multiGet(const std::vector<std::string>& keys) {
  if (keys.empty()) return {};
  protocol::Request r;
  r.op = protocol::Op::MultiGet;
  r.keys = keys;
  auto response = call(r, requestTimeout_);
  HVD_ENFORCE_EQ(response.values.size(), keys.size(), "rendezvous server ", server_,
                 ": values in the answer to a multi-get");
  return std::move(response.values);
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  protocol::Request r;
  r.op = protocol::Op::Wait;
  r.keys = keys;
  r.timeoutMs = timeout.count();
  // The server answers at its own deadline; ours only guards against a server that went away.
  auto response = call(r, timeout + requestTimeout_);
  if (!response.ok)
    throw StoreTimeout(describeTimeout(timeout, response.missing), response.missing);
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  protocol::Request r;
  r.op = protocol::Op::Add;
  r.keys = {key};
  r.delta = delta;
  return call(r, requestTimeout_).counter;
}

}  // namespace hvd::rendezvous

namespace hvd::rendezvous {

std::string TcpStoreClient::localAddress() const {
  return socket_.local_endpoint().address().to_string();
}

bool TcpStoreClient::waitUntilClosed(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint8_t byte = 0;
  try {
    io::readExact(socket_, boost::asio::buffer(&byte, 1), Clock::now() + timeout,
                  "rendezvous server " + server_);
  } catch (const TimeoutError&) {
    return false;
  } catch (const IoError&) {
    return true;  // end of file, or reset: either way the server is gone
  }
  return false;  // a byte nobody asked for: the server is still there
}

}  // namespace hvd::rendezvous
