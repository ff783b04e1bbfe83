#include "collectives/transport/tcp/tcp_connection.h"

#include <cstdio>

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

std::string hexTag(Tag tag) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(tag));
  return buf;
}
}  // namespace

TcpConnection::TcpConnection(asio::ip::tcp::socket socket, ProgressEngine& engine, int selfRank,
                             int size, int peerRank)
    : socket_(std::move(socket)),
      engine_(engine),
      selfRank_(selfRank),
      size_(size),
      peerRank_(peerRank) {
  error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  peerAddress_ = ec ? "unknown" : ep.address().to_string() + ":" + std::to_string(ep.port());
}

std::shared_ptr<RequestState> TcpConnection::makeState(const char* verb, Tag tag,
                                                       std::size_t bytes) const {
  auto state = std::make_shared<RequestState>();
  state->verb = verb;
  state->tag = tag;
  state->bytes = bytes;
  state->describer = this;
  return state;
}

std::string TcpConnection::describe(const RequestState& r) const {
  return detail::concat("rank ", selfRank_, "/", size_, ": ", r.verb, " rank ", peerRank_, " (",
                        peerAddress_, ") tag=", hexTag(r.tag), " ", r.bytes, " bytes");
}

Request TcpConnection::isend(ConstBytes data, Tag tag) {
  return post(sends_, "send to", const_cast<std::byte*>(data.data()), data.size(), tag);
}

Request TcpConnection::irecv(MutableBytes data, Tag tag) {
  return post(recvs_, "recv from", data.data(), data.size(), tag);
}

Request TcpConnection::post(std::deque<Op>& queue, const char* verb, std::byte* data,
                            std::size_t bytes, Tag tag) {
  auto state = makeState(verb, tag, bytes);
  if (broken_) {
    state->done = true;
    state->error = broken_;
    return Request(state, &engine_);
  }
  queue.push_back({{tag, bytes}, data, state});
  if (&queue == &sends_ && !writing_) startWrite();
  if (&queue == &recvs_ && !reading_) startRead();
  return Request(state, &engine_);
}

void TcpConnection::startWrite() {
  writing_ = true;
  Op& op = sends_.front();
  std::array<asio::const_buffer, 2> buffers = {asio::buffer(&op.header, sizeof(Header)),
                                               asio::buffer(op.data, op.header.length)};
  auto self = shared_from_this();
  TransferRemaining all{sizeof(Header) + op.header.length};
  asio::async_write(socket_, buffers, all, [this, self](const error_code& ec, std::size_t got) {
    writing_ = false;
    if (broken_) return;
    if (ec) return failAll(ioError(sends_.front(), ec, got));
    finish(sends_);
    if (!sends_.empty() && !broken_) startWrite();
  });
}

// The receiver knows the exact size it expects, so header and payload arrive with one readv
// straight into the caller's buffer; the header is checked afterwards. (A peer that sent a
// different size has broken the stream either way: the check then names both sides.)
void TcpConnection::startRead() {
  reading_ = true;
  Op& op = recvs_.front();
  std::array<asio::mutable_buffer, 2> buffers = {asio::buffer(&incoming_, sizeof(Header)),
                                                 asio::buffer(op.data, op.header.length)};
  auto self = shared_from_this();
  TransferRemaining all{sizeof(Header) + op.header.length};
  asio::async_read(socket_, buffers, all, [this, self](const error_code& ec, std::size_t got) {
    reading_ = false;
    if (broken_) return;
    if (ec) return failAll(ioError(recvs_.front(), ec, got));
    Op& done = recvs_.front();
    if (incoming_.tag != done.header.tag || incoming_.length != done.header.length)
      return failAll(std::make_exception_ptr(InternalError(detail::concat(
          done.state->description(), ": peer sent tag=", hexTag(incoming_.tag), " ",
          incoming_.length, " bytes instead: the ranks are running different collectives"))));
    finish(recvs_);
    if (!recvs_.empty()) startRead();
  });
}

void TcpConnection::finish(std::deque<Op>& queue) {
  queue.front().state->done = true;
  queue.pop_front();
}

std::exception_ptr TcpConnection::ioError(const Op& op, const error_code& ec,
                                          std::size_t got) const {
  std::string reason = ec == asio::error::eof ? "connection closed by peer" : ec.message();
  if (ec == asio::error::operation_aborted) reason = "connection closed locally";
  return std::make_exception_ptr(IoError(detail::concat(
      op.state->description(), ": ", reason, " after ", got, " bytes (did rank ", peerRank_,
      " exit or crash?)")));
}

void TcpConnection::failAll(std::exception_ptr error) {
  if (!broken_) broken_ = error;
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
  socket_.close(ignored);
}

}  // namespace hvd::collectives::tcp
