// The TCP transport's Device: owns one io_context and a listening socket. connectAll publishes
// "tcp/<rank>" = "ip:port" in the store, connects to every lower rank and accepts every higher
// rank, each link authenticated with the job secret (common/auth.h); a connection that fails
// the handshake is logged and dropped, and the device keeps accepting.
// Thread model: there is no I/O thread. The thread that waits on a Request runs the io_context
// (progressUntil), so a waiting rank sleeps in epoll instead of spinning (apart from an optional
// bounded spin for small messages), and a small message costs no thread hand-off.
#pragma once

#include <boost/asio.hpp>

#include <memory>
#include <string>

#include "collectives/transport/device.h"

namespace hvd::collectives::tcp {

class TcpDevice : public Device,
                  public ProgressEngine,
                  public std::enable_shared_from_this<TcpDevice> {
 public:
  // Binds `bindAddress` (e.g. "127.0.0.1") on an ephemeral port. A non-zero socketBufferBytes
  // sets every link's SO_SNDBUF/SO_RCVBUF before it connects: large buffers let one syscall move
  // megabytes, where the kernel's starting window moves tens of kilobytes. A non-zero `spin`
  // makes a latency-bound progressUntil poll that long (yielding the core to any other
  // runnable thread between polls) before it sleeps in epoll.
  static std::shared_ptr<TcpDevice> create(const std::string& bindAddress, std::string secret,
                                           std::size_t socketBufferBytes = 0,
                                           std::chrono::microseconds spin = {});

  std::unique_ptr<Comm> connectAll(int rank, int size, rendezvous::Store& store,
                                   std::chrono::milliseconds connectTimeout,
                                   std::chrono::milliseconds opTimeout) override;
  void progressUntil(Deadline deadline, bool latencyBound) override;
  void poll() override;
  void wake() override;
  std::string listenAddress() const;  // "ip:port"

 private:
  TcpDevice(const std::string& bindAddress, std::string secret, std::size_t socketBufferBytes,
            std::chrono::microseconds spin);
  std::shared_ptr<Connection> connectTo(int rank, int size, int peer, const std::string& address,
                                        Deadline deadline);
  // Accepts one authenticated peer with a rank in (rank, size) not yet in `accepted`; returns
  // null for a rejected connection. Throws TimeoutError at the deadline.
  std::shared_ptr<Connection> acceptOne(int rank, int size,
                                        const std::vector<std::shared_ptr<Connection>>& accepted,
                                        Deadline deadline);

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  std::string secret_;
  std::size_t socketBufferBytes_;
  std::chrono::microseconds spin_;
};

}  // namespace hvd::collectives::tcp
