// A Connection over one authenticated TCP socket. Each message is a 16-byte header {tag, length}
// followed by the payload. Sends are queued and written one after another; receives are queued
// and filled in order straight into the caller's buffer (no copy, no unexpected-message buffer:
// until a receive is posted nothing is read, and TCP flow control holds the peer back). A send
// and a receive run at the same time on the socket, so the link is full duplex.
// Thread model: all methods and all completion handlers run on the thread that owns the Comm,
// inside TcpDevice::progressUntil; no locks.
#pragma once

#include <boost/asio.hpp>

#include <array>
#include <deque>
#include <memory>

#include "collectives/transport/connection.h"

namespace hvd::collectives::tcp {

class TcpConnection : public Connection,
                      public RequestDescriber,
                      public std::enable_shared_from_this<TcpConnection> {
 public:
  TcpConnection(boost::asio::ip::tcp::socket socket, ProgressEngine& engine, int selfRank,
                int size, int peerRank);

  int peerRank() const override { return peerRank_; }
  std::string peerAddress() const override { return peerAddress_; }
  Request isend(ConstBytes data, Tag tag) override;
  Request irecv(MutableBytes data, Tag tag) override;
  void close() override;
  std::string describe(const RequestState& request) const override;

 private:
  struct Header {
    uint64_t tag;
    uint64_t length;
  };
  struct Op {
    Header header;
    std::byte* data;
    std::shared_ptr<RequestState> state;
  };

  Request post(std::deque<Op>& queue, const char* verb, std::byte* data, std::size_t bytes,
               Tag tag);
  std::shared_ptr<RequestState> makeState(const char* verb, Tag tag, std::size_t bytes) const;
  void startWrite();
  void startRead();
  void finish(std::deque<Op>& queue);
  // Fails every pending operation with the same error; the connection is dead afterwards.
  void failAll(std::exception_ptr error);
  std::exception_ptr ioError(const Op& op, const boost::system::error_code& ec,
                             std::size_t got) const;

  boost::asio::ip::tcp::socket socket_;
  ProgressEngine& engine_;
  int selfRank_;
  int size_;
  int peerRank_;
  std::string peerAddress_;
  std::deque<Op> sends_;
  std::deque<Op> recvs_;
  bool writing_ = false;
  bool reading_ = false;
  Header incoming_{};
  std::exception_ptr broken_;
};

}  // namespace hvd::collectives::tcp
