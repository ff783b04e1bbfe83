// The TCP transport's Device: owns one io_context and a listening socket. connectAll publishes
// "tcp/<rank>" = "ip:port" in the store, reads every rank's from the one table rank 0 gathers
// (collectives/rendezvous/rank_table.h: O(N) store requests for the job, not N²), connects to
// every lower rank, all at once (common/handshake_dialer.h), and accepts every higher rank (of
// the pairs its LinkShape links), each link
// authenticated with the job secret and the two ranks bound into the proof
// (common/handshake_listener.h: handshakes run concurrently under a deadline, so a stranger cannot
// hold up the job); a connection that fails the handshake is logged and dropped, and the listening
// socket closes once every peer is connected. Thread model: there is no I/O thread. The thread that
// waits on a Request runs the io_context (progressUntil), so a waiting rank sleeps in the kernel
// (after the bounded spin its WaitPolicy gives), and a small message costs no thread hand-off. A
// wait whose only pending operations are direct receives (see TcpConnection) sleeps in poll() on
// their sockets, or in a blocking recvmsg when there is one and the device is WaitMode::Blocking,
// and reads them itself; any other wait runs Asio, with the direct receives handed to it first.
// wake() writes an eventfd that both kinds of wait watch.
#pragma once

#include <poll.h>

#include <boost/asio.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "collectives/transport/device.h"
#include "collectives/transport/wait_policy.h"
#include "common/handshake_listener.h"
#include "common/spin.h"

namespace hvd::collectives::tcp {

class TcpConnection;

class TcpDevice : public Device,
                  public ProgressEngine,
                  public std::enable_shared_from_this<TcpDevice> {
 public:
  // Binds `bindAddress` (e.g. "127.0.0.1") on an ephemeral port. A non-zero socketBufferBytes
  // sets every link's SO_SNDBUF/SO_RCVBUF before it connects: large buffers let one syscall move
  // megabytes, where the kernel's starting window moves tens of kilobytes.
  // A connecting peer must finish its handshake within handshakeTimeout. `logs`: the owning
  // Runtime's (common/logging.h); null: the process's.
  static std::shared_ptr<TcpDevice> create(
      const std::string& bindAddress, std::string secret, std::size_t socketBufferBytes = 0,
      WaitPolicy waits = {},
      std::chrono::milliseconds handshakeTimeout = io::kDefaultHandshakeTimeout,
      std::shared_ptr<log::Logs> logs = nullptr);

  std::unique_ptr<Comm> connectAll(int rank, int size, rendezvous::Store& store,
                                   std::chrono::milliseconds connectTimeout,
                                   std::chrono::milliseconds opTimeout,
                                   LinkShape shape = LinkShape::AllPairs) override;
  void progressUntil(Deadline deadline, bool latencyBound) override;
  void poll() override;
  void wake() override;
  const StallWatch& stallWatch() const override { return waits_.spins.stall; }
  // "ip:port"; the port stays closed once connectAll has connected every peer.
  std::string listenAddress() const;

  // For TcpConnection: a connection whose front receive is direct registers here while it is,
  // and counts the Asio operations it has in flight.
  void watch(TcpConnection* connection);
  void unwatch(TcpConnection* connection);
  void asioStarted() { ++asioOperations_; }
  void asioFinished() { --asioOperations_; }

 private:
  TcpDevice(const std::string& bindAddress, std::string secret, std::size_t socketBufferBytes,
            WaitPolicy waits, std::chrono::milliseconds handshakeTimeout,
            std::shared_ptr<log::Logs> logs);
  // progressUntil with an explicit spin (progressUntil takes it from the WaitPolicy).
  void progressWithSpin(Deadline deadline, std::chrono::microseconds spin);
  // Polls the direct receives' sockets (and the wake-up) until one is ready, `spin` has
  // passed with none ready (when `spin` is non-zero the poll does not sleep), or the deadline;
  // then reads the ready ones.
  void pollDirect(Deadline deadline, std::chrono::microseconds spin);
  void handDirectReadsToAsio();
  void armWake();
  void drainWake();
  // Publishes this rank's address and returns every rank's (rendezvous/rank_table.h), serving
  // the listener meanwhile: the table is gathered on a helper thread while this one runs io_,
  // so a connection that arrives first (a stranger, a peer that read the table sooner) is
  // answered at once, as before the table existed. Throws TimeoutError naming the ranks that
  // did not publish within `timeout`. A star needs only rank 0's address: the others wait for
  // it alone (entries of other ranks stay empty), not for the slowest rank to publish.
  std::vector<rendezvous::Bytes> gatherAddresses(int rank, int size, rendezvous::Store& store,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& self, LinkShape shape);
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  std::string secret_;
  std::size_t socketBufferBytes_;
  WaitPolicy waits_;
  std::chrono::milliseconds handshakeTimeout_;
  std::shared_ptr<log::Logs> logs_;
  std::string listenAddress_;
  std::atomic<bool> wakeRequested_{false};  // set by wake(), cleared when a wait consumes it
  ContentionWatch contention_;              // whether polling pays (common/spin.h)
  int wakeFd_ = -1;                         // eventfd; wake() adds to it
  boost::asio::posix::stream_descriptor wakeDescriptor_{io_};
  uint64_t wakeCount_ = 0;
  bool wakeArmed_ = false;  // an Asio read of the eventfd is in flight
  std::vector<TcpConnection*> direct_;
  std::vector<pollfd> pollFds_;
  std::vector<TcpConnection*> polled_;
  int asioOperations_ = 0;
};

}  // namespace hvd::collectives::tcp
