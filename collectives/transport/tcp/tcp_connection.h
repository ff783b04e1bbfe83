// A Connection over one authenticated TCP socket. Each message is a 16-byte header {tag, length}
// followed by the payload. Sends are queued and written one after another; receives are queued
// and filled in order straight into the caller's buffer (no copy, no unexpected-message buffer:
// until a receive is posted nothing is read, and TCP flow control holds the peer back). A send
// and a receive run at the same time on the socket, so the link is full duplex.
//
// Two ways to move a message. A small one (at most kLatencyBoundBytes) that finds its queue idle
// goes straight to the socket: the send is one non-blocking sendmsg, and the receive is "direct":
// it waits for the TcpDevice to poll() the socket and then reads it with recvmsg. That is one
// system call fewer per message than an Asio read (whose first, speculative recvmsg nearly
// always finds nothing), which is a tenth of a 4-byte allreduce's time. Everything else, and
// whatever a direct operation leaves unfinished, goes through Asio's async_write/async_read.
// Thread model: all methods and all completion handlers run on the thread that owns the Comm,
// inside TcpDevice's progressUntil or poll; no locks.
#pragma once

#include <boost/asio.hpp>

#include <array>
#include <deque>
#include <memory>

#include "collectives/transport/connection.h"
#include "collectives/transport/message.h"

namespace hvd::collectives::tcp {

class TcpDevice;

class TcpConnection : public Connection,
                      public RequestDescriber,
                      public std::enable_shared_from_this<TcpConnection> {
 public:
  // The device must outlive the connection (the Comm that holds both closes and drops the
  // connections first).
  // `blockingReceives`: readDirect(true) may be used (it sets a receive timeout on the socket).
  TcpConnection(boost::asio::ip::tcp::socket socket, TcpDevice& device, int selfRank, int size,
                int peerRank, bool blockingReceives);
  ~TcpConnection() override;

  int peerRank() const override { return peerRank_; }
  std::string peerAddress() const override { return peerAddress_; }
  Request isend(ConstBytes data, Tag tag) override;
  Request irecv(MutableBytes data, Tag tag) override;
  void close() override;
  std::string describe(const RequestState& request) const override;

  // For TcpDevice. The socket a direct receive waits on.
  int nativeHandle() { return socket_.native_handle(); }
  // Reads the direct receive's bytes: what the socket holds, or with `block` (only while no
  // Asio operation of this device is in flight: it makes the socket blocking) until the whole
  // message, kBlockingSlice or a signal. Completes the receive or fails the connection.
  void readDirect(bool block);
  // A blocking read returns after this much time without the whole message, so its wait can
  // look at its deadline and at wake-ups.
  static constexpr std::chrono::milliseconds kBlockingSlice{50};
  // Hands the direct receive to Asio, for a wait that must also run Asio's operations.
  void startDirectReadInAsio();

 private:
  using Header = MessageHeader;
  using Op = QueuedMessage;

  Request failed(const char* verb, std::size_t bytes, Tag tag) const;
  // Starts the front receive: direct when it is small, else through Asio.
  void startRead();
  void startAsioWrite();
  void startAsioRead();
  // Checks the completed front receive's header and finishes it, then starts the next one.
  void completeRead();
  void setDirect(bool direct);
  // Fails every pending operation with the same error; the connection is dead afterwards.
  void failAll(std::exception_ptr error);
  std::exception_ptr ioError(const Op& op, const boost::system::error_code& ec,
                             std::size_t got) const;

  boost::asio::ip::tcp::socket socket_;
  TcpDevice& device_;
  int selfRank_;
  int size_;
  int peerRank_;
  std::string peerAddress_;
  std::deque<Op> sends_;
  std::deque<Op> recvs_;
  bool writing_ = false;  // an Asio write is in flight
  bool reading_ = false;  // an Asio read is in flight
  bool direct_ = false;   // the front receive waits for the device's poll
  bool blockingReceives_;
  Header incoming_{};
  std::exception_ptr broken_;
};

}  // namespace hvd::collectives::tcp
