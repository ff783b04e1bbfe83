#include "runtime/munge_secret.h"

#include <unistd.h>

#include <boost/asio.hpp>
#include <sstream>
#include <thread>

#include "common/child_process.h"
#include "common/error.h"

namespace hvd::runtime {
namespace {

using boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kMungeTimeout{10};
constexpr std::size_t kMaxCredential = 8192;
const std::string kPayloadTag = "hvd-job-secret";

std::string payloadFor(const std::string& jobId, const std::string& secret) {
  return kPayloadTag + " " + jobId + " " + secret;
}

std::string encode(const std::string& payload) {
  auto r =
      runProgram({"munge", "--restrict-uid=" + std::to_string(::getuid())}, payload, kMungeTimeout);
  if (r.exitCode != 0) throw IoError("munge failed: " + r.err);
  return r.out;
}

// unmunge --numeric: "KEY: value" metadata lines, a blank line, then the payload.
std::string decode(const std::string& credential, const std::string& jobId,
                   const std::string& from) {
  auto r = runProgram({"unmunge", "--numeric"}, credential, kMungeTimeout);
  std::istringstream lines(r.out);
  std::string line, status, uid;
  while (std::getline(lines, line) && !line.empty()) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    std::string value = line.substr(line.find_first_not_of(' ', colon + 1));
    if (key == "STATUS") status = value;
    if (key == "UID") uid = value;
  }
  if (r.exitCode != 0)
    throw IoError(detail::concat("munge refused the credential from ", from, ": ",
                                 status.empty() ? r.err : status));
  if (uid != std::to_string(::getuid()))
    throw IoError(detail::concat("the credential from ", from, " was made by uid ", uid,
                                 ", not by this user (uid ", ::getuid(),
                                 "): another user's process answered on rank 0's port"));
  std::string payload((std::istreambuf_iterator<char>(lines)), std::istreambuf_iterator<char>());
  std::string expected = kPayloadTag + " " + jobId + " ";
  if (payload.rfind(expected, 0) != 0 || payload.size() == expected.size())
    throw IoError(detail::concat("the credential from ", from, " is not for job ", jobId,
                                 " (another job of this user holds the port?)"));
  return payload.substr(expected.size());
}

}  // namespace

bool mungeAvailable(const std::string& path) {
  auto found = [&](const std::string& program) {
    std::istringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':'))
      if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    return false;
  };
  return found("munge") && found("unmunge");
}

struct MungeSecretServer::State {
  boost::asio::io_context io;
  tcp::acceptor acceptor{io};
  std::string payload;
  std::shared_ptr<log::Logs> logs;
  std::thread thread;

  void acceptNext() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == boost::asio::error::operation_aborted) return;
      if (!ec) answer(std::move(socket));
      acceptNext();
    });
  }

  // One credential per asker: munge refuses one decoded twice on a node.
  void answer(tcp::socket socket) {
    try {
      std::string credential = encode(payload);
      boost::asio::write(socket, boost::asio::buffer(credential));
    } catch (const std::exception& e) {
      logs->get("runtime")->warn("cannot hand the job secret to {}: {}",
                                 socket.remote_endpoint().address().to_string(), e.what());
    }
  }
};

MungeSecretServer::MungeSecretServer(const std::string& bindAddress, uint16_t port,
                                     std::string jobId, std::string secret,
                                     std::shared_ptr<log::Logs> logs)
    : state_(std::make_unique<State>()) {
  state_->payload = payloadFor(jobId, secret);
  state_->logs = std::move(logs);
  encode(state_->payload);  // munge works here, or rank 0 fails now, saying why
  try {
    tcp::endpoint at(boost::asio::ip::make_address(bindAddress), port);
    state_->acceptor.open(at.protocol());
    state_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    state_->acceptor.bind(at);
    state_->acceptor.listen();
  } catch (const boost::system::system_error& e) {
    throw IoError(detail::concat("cannot serve the job secret at ", bindAddress, ":", port, ": ",
                                 e.code().message()));
  }
  state_->acceptNext();
  state_->thread = std::thread([s = state_.get()] { s->io.run(); });
}

MungeSecretServer::~MungeSecretServer() {
  state_->io.stop();
  if (state_->thread.joinable()) state_->thread.join();
}

std::string fetchMungeSecret(const std::string& address, uint16_t port, const std::string& jobId,
                             std::chrono::milliseconds timeout) {
  const std::string from = detail::concat("rank 0 (", address, ":", port, ")");
  auto deadline = Clock::now() + timeout;
  std::string lastError;
  boost::asio::io_context io;
  tcp::resolver resolver(io);
  while (Clock::now() < deadline) {
    try {
      tcp::socket socket(io);
      boost::asio::connect(socket, resolver.resolve(address, std::to_string(port)));
      // Rank 0 answers at once and closes; bounded so that a stray server cannot hold us.
      struct timeval tv {
        static_cast<time_t>(kMungeTimeout.count()), 0
      };
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string credential;
      boost::system::error_code ec;
      char buf[1024];
      while (credential.size() < kMaxCredential) {
        std::size_t n = socket.read_some(boost::asio::buffer(buf), ec);
        credential.append(buf, n);
        if (ec) break;
      }
      if (ec && ec != boost::asio::error::eof)
        throw IoError(detail::concat("reading the credential from ", from, ": ", ec.message()));
      if (credential.empty())
        throw IoError(from + " sent no credential (its munge failed: see rank 0's error)");
      return decode(credential, jobId, from);
    } catch (const boost::system::system_error& e) {
      lastError = e.code().message();  // not listening yet: rank 0 is still starting
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw TimeoutError(detail::concat("no job secret from ", from, " within ", timeout.count(),
                                    " ms (last: ", lastError, ")"));
}

}  // namespace hvd::runtime
