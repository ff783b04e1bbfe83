// A Store backed by the launcher's rendezvous server over one authenticated TCP connection.
// Thread-safety: calls are serialised by an internal mutex; each call is one request/response.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <mutex>

#include "collectives/rendezvous/protocol.h"
#include "collectives/rendezvous/store.h"

namespace hvd::rendezvous {

class TcpStoreClient : public Store {
 public:
  // Connects and authenticates, retrying refused connections until connectTimeout passes.
  // `requestTimeout` bounds every non-wait request. Throws TimeoutError or IoError.
  TcpStoreClient(const std::string& host, uint16_t port, const std::string& secret,
                 std::chrono::milliseconds connectTimeout,
                 std::chrono::milliseconds requestTimeout = std::chrono::seconds(30));

  void set(const std::string& key, const Bytes& value) override;
  std::optional<Bytes> get(const std::string& key) override;
  std::vector<std::optional<Bytes>> multiGet(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  // The local IP address of the connection to the server: an address the server's network can
  // reach this process on.
  std::string localAddress() const;
  // Waits up to `timeout` for the server to close this connection (a server that stops closes
  // every connection); true when it did. The client is unusable afterwards.
  bool waitUntilClosed(std::chrono::milliseconds timeout);

 private:
  protocol::Response call(const protocol::Request& request, std::chrono::milliseconds timeout);

  std::mutex mutex_;  // guards the socket: one request in flight at a time
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_{io_};
  std::string server_;
  std::chrono::milliseconds requestTimeout_;
};

}  // namespace hvd::rendezvous
