#include "collectives/transport/tcp/tcp_connection.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdio>

#include "collectives/transport/tcp/tcp_device.h"
#include "common/error.h"

namespace hvd::collectives::tcp {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Asio's transfer_all moves at most 64 KiB per system call; asking for everything that is left
// lets one writev/readv move megabytes when the socket buffers allow it (4x fewer calls and
// wake-ups at 4 MiB).
struct TransferRemaining {
  std::size_t total;
  std::size_t operator()(const error_code& ec, std::size_t done) const {
    return ec ? 0 : total - done;
  }
};

// What is left of a message (header, then payload) after `done` bytes: one or two pieces.
struct Pieces {
  std::array<iovec, 2> iov{};
  int count = 0;
};
Pieces remaining(void* header, std::size_t headerBytes, std::byte* payload, std::size_t length,
                 std::size_t done) {
  Pieces p;
  if (done < headerBytes)
    p.iov[p.count++] = {static_cast<char*>(header) + done, headerBytes - done};
  std::size_t intoPayload = done > headerBytes ? done - headerBytes : 0;
  if (length > intoPayload) p.iov[p.count++] = {payload + intoPayload, length - intoPayload};
  return p;
}

// The same pieces as Asio buffers (a missing second piece becomes an empty buffer).
template <typename Buffer>
std::array<Buffer, 2> asioBuffers(const Pieces& p) {
  return {Buffer(p.iov[0].iov_base, p.count > 0 ? p.iov[0].iov_len : 0),
          Buffer(p.iov[1].iov_base, p.count > 1 ? p.iov[1].iov_len : 0)};
}

bool wouldBlock(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

error_code systemError(int e) { return error_code(e, asio::error::get_system_category()); }

}  // namespace

TcpConnection::TcpConnection(asio::ip::tcp::socket socket, TcpDevice& device, int selfRank,
                             int size, int peerRank, bool blockingReceives)
    : socket_(std::move(socket)),
      device_(device),
      selfRank_(selfRank),
      size_(size),
      peerRank_(peerRank),
      blockingReceives_(blockingReceives) {
  if (blockingReceives_) {
    timeval slice{0, static_cast<suseconds_t>(std::chrono::microseconds(kBlockingSlice).count())};
    if (::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice) != 0)
      blockingReceives_ = false;
  }
  error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  peerAddress_ = ec ? "unknown" : ep.address().to_string() + ":" + std::to_string(ep.port());
}

// A connection still waiting on a direct receive here was never closed; after close() (or once
// the device's io_context is being torn down) nothing touches the device.
TcpConnection::~TcpConnection() { setDirect(false); }

Request TcpConnection::failed(const char* verb, std::size_t bytes, Tag tag) const {
  auto state = newRequestState(verb, tag, bytes, this);
  state->done = true;
  state->error = broken_;
  return Request(state, &device_);
}

std::string TcpConnection::describe(const RequestState& r) const {
  return describeRequest(selfRank_, size_, peerRank_, peerAddress_, r);
}

Request TcpConnection::isend(ConstBytes data, Tag tag) {
  if (broken_) return failed("send to", data.size(), tag);
  Op op{{tag, data.size()}, const_cast<std::byte*>(data.data()), nullptr};
  int error = 0;
  if (!writing_ && sends_.empty() && data.size() <= kLatencyBoundBytes) {
    // The socket buffer nearly always takes a small message whole: then there is nothing to
    // wait for, and no state to allocate.
    Pieces p = remaining(&op.header, sizeof(Header), op.data, data.size(), 0);
    msghdr message{};
    message.msg_iov = p.iov.data();
    message.msg_iovlen = p.count;
    ssize_t sent = ::sendmsg(socket_.native_handle(), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent == static_cast<ssize_t>(sizeof(Header) + data.size())) return Request();
    if (sent > 0) op.done = static_cast<std::size_t>(sent);
    if (sent < 0 && !wouldBlock(errno)) error = errno;
  }
  op.state = newRequestState("send to", tag, data.size(), this);
  sends_.push_back(op);
  if (error)
    failAll(ioError(op, systemError(error), 0));
  else if (!writing_)
    startAsioWrite();
  return Request(op.state, &device_);
}

Request TcpConnection::irecv(MutableBytes data, Tag tag) {
  if (broken_) return failed("recv from", data.size(), tag);
  auto state = newRequestState("recv from", tag, data.size(), this);
  recvs_.push_back({{tag, data.size()}, data.data(), state});
  if (!reading_ && !direct_) startRead();
  return Request(state, &device_);
}

void TcpConnection::startRead() {
  if (recvs_.front().header.length <= kLatencyBoundBytes)
    setDirect(true);
  else
    startAsioRead();
}

void TcpConnection::setDirect(bool direct) {
  if (direct == direct_) return;
  direct_ = direct;
  if (direct)
    device_.watch(this);
  else
    device_.unwatch(this);
}

void TcpConnection::startAsioWrite() {
  writing_ = true;
  device_.asioStarted();
  Op& op = sends_.front();
  auto buffers = asioBuffers<asio::const_buffer>(
      remaining(&op.header, sizeof(Header), op.data, op.header.length, op.done));
  auto self = shared_from_this();
  TransferRemaining all{sizeof(Header) + op.header.length - op.done};
  asio::async_write(socket_, buffers, all, [this, self](const error_code& ec, std::size_t got) {
    writing_ = false;
    device_.asioFinished();
    if (broken_) return;
    Op& op = sends_.front();
    op.done += got;
    op.state->moved = op.done;
    if (ec) return failAll(ioError(op, ec, op.done));
    op.state->done = true;
    sends_.pop_front();
    if (!sends_.empty()) startAsioWrite();
  });
}

// The receiver knows the exact size it expects, so header and payload arrive with one readv
// straight into the caller's buffer; the header is checked afterwards. (A peer that sent a
// different size has broken the stream either way: the check then names both sides.)
void TcpConnection::startAsioRead() {
  reading_ = true;
  device_.asioStarted();
  Op& op = recvs_.front();
  auto buffers = asioBuffers<asio::mutable_buffer>(
      remaining(&incoming_, sizeof(Header), op.data, op.header.length, op.done));
  auto self = shared_from_this();
  TransferRemaining all{sizeof(Header) + op.header.length - op.done};
  asio::async_read(socket_, buffers, all, [this, self](const error_code& ec, std::size_t got) {
    reading_ = false;
    device_.asioFinished();
    if (broken_) return;
    Op& op = recvs_.front();
    op.done += got;
    if (op.state) op.state->moved = op.done;
    if (ec) return failAll(ioError(op, ec, op.done));
    completeRead();
  });
}

void TcpConnection::startDirectReadInAsio() {
  if (!direct_) return;
  setDirect(false);
  startAsioRead();
}

void TcpConnection::readDirect(bool block) {
  if (!direct_) return;
  block = block && blockingReceives_;
  if (block && socket_.native_non_blocking()) {
    // Through Asio, so that its next operation on the socket makes it non-blocking again.
    error_code ec;
    socket_.native_non_blocking(false, ec);
    if (ec) block = false;
  }
  Op& op = recvs_.front();
  Pieces p = remaining(&incoming_, sizeof(Header), op.data, op.header.length, op.done);
  msghdr message{};
  message.msg_iov = p.iov.data();
  message.msg_iovlen = p.count;
  ssize_t got = ::recvmsg(socket_.native_handle(), &message, block ? MSG_WAITALL : MSG_DONTWAIT);
  if (got > 0) {
    op.done += static_cast<std::size_t>(got);
    if (op.state) op.state->moved = op.done;
    if (op.done < sizeof(Header) + op.header.length) return;
    setDirect(false);
    return completeRead();
  }
  if (got == 0) return failAll(ioError(op, asio::error::eof, op.done));
  if (!wouldBlock(errno)) failAll(ioError(op, systemError(errno), op.done));
}

void TcpConnection::completeRead() {
  Op& done = recvs_.front();
  if (incoming_.tag != done.header.tag || incoming_.length != done.header.length)
    return failAll(std::make_exception_ptr(InternalError(detail::concat(
        done.state->description(), ": peer sent tag=", hexTag(incoming_.tag), " ", incoming_.length,
        " bytes instead: the ranks are running different collectives"))));
  done.state->done = true;
  recvs_.pop_front();
  if (!recvs_.empty()) startRead();
}

std::exception_ptr TcpConnection::ioError(const Op& op, const error_code& ec,
                                          std::size_t got) const {
  std::string reason = ec == asio::error::eof ? "connection closed by peer" : ec.message();
  if (ec == asio::error::operation_aborted) reason = "connection closed locally";
  return std::make_exception_ptr(
      IoError(detail::concat(op.state->description(), ": ", reason, " after ", got,
                             " bytes (did rank ", peerRank_, " exit or crash?)")));
}

void TcpConnection::failAll(std::exception_ptr error) {
  if (!broken_) broken_ = error;
  setDirect(false);
  for (auto* queue : {&sends_, &recvs_}) {
    for (auto& op : *queue) {
      op.state->done = true;
      op.state->error = error;
    }
    queue->clear();
  }
  error_code ignored;
  socket_.close(ignored);
}

void TcpConnection::close() {
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  failAll(std::make_exception_ptr(
      IoError(detail::concat("rank ", selfRank_, "/", size_, ": link to rank ", peerRank_, " (",
                             peerAddress_, ") was closed locally"))));
}

}  // namespace hvd::collectives::tcp
