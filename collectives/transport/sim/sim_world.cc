#include "collectives/transport/sim/sim_world.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <iomanip>
#include <queue>
#include <sstream>

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include "collectives/transport/work_meter.h"
#include "common/error.h"

namespace hvd::collectives::sim {
namespace ctx = boost::context;

namespace {

// Long enough never to fire: the simulation detects stuck ranks itself, in virtual time.
constexpr std::chrono::hours kRealTimeout{24};

// A resource that moves bytes at a rate and serves transfers in the order they are posted.
struct Port {
  double freeAt = 0;
  void reset() { freeAt = 0; }
};

struct Message {
  Tag tag;
  std::size_t bytes;
  double arrival;
  std::vector<std::byte> payload;  // empty when timing only
};

struct PostedReceive {
  MutableBytes data;
  Tag tag;
  double posted;
  std::shared_ptr<RequestState> state;
};

// The messages from one peer that no receive has taken yet, or the receives no message has met.
struct Inbox {
  std::deque<Message> messages;
  std::deque<PostedReceive> receives;
};

std::string hexTag(Tag tag) {
  std::ostringstream out;
  out << "0x" << std::hex << tag;
  return out.str();
}

}  // namespace

struct SimWorld::Impl {
  class Connection;
  class Progress;

  enum class State { Ready, Running, Blocked, Finished };

  struct Rank {
    double clock = 0;
    State state = State::Finished;
    ctx::fiber fiber;
    std::unique_ptr<Comm> comm;
    Port sendPort, receivePort;
    std::exception_ptr error;
    double errorTime = 0;
    std::string deadlock;  // set when the scheduler finds this rank stuck forever
  };

  struct Host {
    Port nicOut, nicIn, memory;
  };
  struct Switch {
    Port up, down;
  };

  struct Event {
    double time;
    uint64_t sequence;
    int rank;
    std::shared_ptr<RequestState> request;  // null: resume the rank
    std::exception_ptr error;               // the request's, if it fails
    bool operator>(const Event& o) const {
      return time != o.time ? time > o.time : sequence > o.sequence;
    }
  };

  class Meter : public WorkMeter {
   public:
    explicit Meter(Impl& impl) : impl_(impl) {}
    bool reduced(std::size_t bytes) override {
      impl_.charge(impl_.options.model.reduceSeconds(static_cast<double>(bytes)));
      return !impl_.options.moveData;
    }

   private:
    Impl& impl_;
  };

  Impl(int size, SimOptions o);

  // Which links a message takes, as the runtime builds them: a communicator that spans several
  // hosts is linked by one transport, TCP, also between ranks of one host (through the host's
  // loopback); the hierarchical form's communicators within a host, and a world of one host,
  // use shared memory.
  enum class Plane { Flat, WithinHost };

  void buildComms();
  Request post(Plane plane, int from, int to, ConstBytes data, Tag tag);
  Request receive(Plane plane, int at, int from, MutableBytes data, Tag tag);
  void deliver(int at, int from, Message& message, PostedReceive& receive);
  double transfer(Plane plane, int from, int to, std::size_t bytes, double at, double* sendDone);
  std::size_t linkIndex(Plane plane, int rank, int peer) const;
  Connection& link(Plane plane, int rank, int peer);
  const Connection* linkIfAny(Plane plane, int rank, int peer) const;
  void push(double time, int rank, std::shared_ptr<RequestState> request = nullptr,
            std::exception_ptr error = nullptr) {
    events.push({time, sequence++, rank, std::move(request), std::move(error)});
  }

  // Called on a rank's fiber.
  void yield() { scheduler = std::move(scheduler).resume(); }
  void block();
  void charge(double seconds);
  void pollNow();

  // Called by the scheduler.
  SimRun run(const std::function<void(Comm&)>& fn);
  void resume(int r, double time);
  bool releaseStuckRanks();
  std::string describeStuck(int r) const;

  int size;
  SimOptions options;
  std::vector<Rank> ranks;
  std::vector<Host> hosts;
  std::vector<Switch> switches;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  uint64_t sequence = 0;
  int current = -1;  // the rank whose fiber runs
  ctx::fiber scheduler;
  uint64_t messages = 0, bytesSent = 0;
  // Connections of all ranks, allocated once (size^2 of them, then size * ranksPerHost within
  // hosts when the world has a hierarchy; a Comm holds shared_ptrs that alias this block instead
  // of owning one allocation each).
  std::shared_ptr<std::vector<Connection>> connections;
  bool withinHostPlane = false;
  std::vector<std::shared_ptr<Progress>> progress;
};

class SimWorld::Impl::Connection : public collectives::Connection, public RequestDescriber {
 public:
  Connection() = default;
  Connection(Impl* impl, Plane plane, int rank, int peer)
      : impl_(impl), plane_(plane), rank_(rank), peer_(peer) {}
  int peerRank() const override { return peer_; }
  std::string peerAddress() const override { return "simulated"; }
  Request isend(ConstBytes data, Tag tag) override {
    return impl_->post(plane_, rank_, peer_, data, tag);
  }
  Request irecv(MutableBytes data, Tag tag) override {
    return impl_->receive(plane_, rank_, peer_, data, tag);
  }
  void close() override {}
  // At the receiving end: what came from the peer, or waits for it. Made on first use (most
  // of a large world's size^2 connections never carry a message).
  Inbox& inbox() {
    if (!inbox_) inbox_ = std::make_unique<Inbox>();
    return *inbox_;
  }
  const Inbox* inboxIfAny() const { return inbox_.get(); }
  void clear() { inbox_.reset(); }
  std::string describe(const RequestState& r) const override {
    return detail::concat("rank ", rank_, "/", impl_->size, ": ", r.verb, " rank ", peer_,
                          " (simulated) tag=", hexTag(r.tag), " ", r.bytes, " bytes");
  }

 private:
  Impl* impl_ = nullptr;
  Plane plane_ = Plane::Flat;
  int rank_ = 0;
  int peer_ = 0;
  std::unique_ptr<Inbox> inbox_;
};

// Within a host, rank r's link to a rank of its host is at r * ranksPerHost + that rank's index
// on the host, after the flat plane's size^2.
std::size_t SimWorld::Impl::linkIndex(Plane plane, int rank, int peer) const {
  auto n = static_cast<std::size_t>(size);
  if (plane == Plane::Flat) return rank * n + peer;
  auto perHost = static_cast<std::size_t>(options.model.ranksPerHost);
  return n * n + rank * perHost + peer % perHost;
}

SimWorld::Impl::Connection& SimWorld::Impl::link(Plane plane, int rank, int peer) {
  return (*connections)[linkIndex(plane, rank, peer)];
}

const SimWorld::Impl::Connection* SimWorld::Impl::linkIfAny(Plane plane, int rank, int peer) const {
  if (rank == peer) return nullptr;
  if (plane == Plane::WithinHost && !(withinHostPlane && options.model.sameHost(rank, peer)))
    return nullptr;
  return &(*connections)[linkIndex(plane, rank, peer)];
}

// A rank's waits hand the thread to the scheduler until one of its operations completes.
class SimWorld::Impl::Progress : public ProgressEngine {
 public:
  explicit Progress(Impl& impl) : impl_(impl) {}
  void progressUntil(Deadline, bool) override { impl_.block(); }
  // Runs what completes up to this rank's present time; never advances it.
  void poll() override { impl_.pollNow(); }
  void wake() override {}

 private:
  Impl& impl_;
};

SimWorld::Impl::Impl(int n, SimOptions o) : size(n), options(std::move(o)), ranks(n) {
  HVD_ENFORCE(n >= 1, "a simulated world needs at least one rank, not ", n);
  options.model.validate("simulated network model");
  int hostCount = (n + options.model.ranksPerHost - 1) / options.model.ranksPerHost;
  hosts.resize(hostCount);
  switches.resize(options.model.switchOf(hostCount - 1) + 1);
  buildComms();
}

void SimWorld::Impl::buildComms() {
  int perHost = options.model.ranksPerHost;
  withinHostPlane = (options.hierarchicalAllreduce || options.hierarchicalAllgather ||
                     options.hierarchicalAllreduceByModel) &&
                    perHost > 1 && size % perHost == 0 && size > perHost;
  auto n = static_cast<std::size_t>(size);
  connections = std::make_shared<std::vector<Connection>>();
  connections->reserve(n * n + (withinHostPlane ? n * perHost : 0));
  for (int r = 0; r < size; ++r)
    for (int p = 0; p < size; ++p) connections->emplace_back(this, Plane::Flat, r, p);
  if (withinHostPlane)
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < perHost; ++i)
        connections->emplace_back(this, Plane::WithinHost, r, r / perHost * perHost + i);
  auto aliased = [&](Plane plane, int r, int p) {
    return std::shared_ptr<collectives::Connection>(connections, &link(plane, r, p));
  };
  for (int r = 0; r < size; ++r) {
    std::vector<std::shared_ptr<collectives::Connection>> links(size);
    for (int p = 0; p < size; ++p)
      if (p != r) links[p] = aliased(Plane::Flat, r, p);
    progress.push_back(std::make_shared<Progress>(*this));
    ranks[r].comm = std::make_unique<Comm>(
        r, size, std::move(links), std::chrono::milliseconds(kRealTimeout), progress.back());
    ranks[r].comm->setLinkName("sim");
  }
  if (!withinHostPlane) return;
  int hostCount = size / perHost;
  std::vector<std::vector<int>> layout(hostCount);
  for (int r = 0; r < size; ++r) layout[r / perHost].push_back(r);
  for (int r = 0; r < size; ++r) {
    Comm::Hierarchy h;
    std::vector<std::shared_ptr<collectives::Connection>> local(perHost);
    for (int p : layout[r / perHost])
      if (p != r) local[p % perHost] = aliased(Plane::WithinHost, r, p);
    h.local = std::make_unique<Comm>(r % perHost, perHost, std::move(local),
                                     std::chrono::milliseconds(kRealTimeout), progress[r]);
    h.local->setLinkName("sim");
    std::vector<int> column;
    for (int host = 0; host < hostCount; ++host) column.push_back(host * perHost + r % perHost);
    h.cross = ranks[r].comm->subset(column);
    h.hosts = layout;
    h.allreduce = options.hierarchicalAllreduce;
    h.allgather = options.hierarchicalAllgather;
    h.allreduceByModel = options.hierarchicalAllreduceByModel;
    ranks[r].comm->setHierarchy(std::move(h));
  }
}

// The time the last byte of a transfer posted at `at` arrives; *sendDone: when it has left.
double SimWorld::Impl::transfer(Plane plane, int from, int to, std::size_t bytes, double at,
                                double* sendDone) {
  const NetworkModel& m = options.model;
  double b = static_cast<double>(bytes);
  struct Use {
    Port* port;
    double rate;
  };
  Use path[5];
  int uses = 0;
  double latency;
  if (m.sameHost(from, to)) {
    const LinkModel& within = m.sameHostLink(plane == Plane::Flat && size > m.ranksPerHost);
    latency = within.latencySeconds;
    path[uses++] = {&ranks[from].sendPort, within.bytesPerSecond};
    path[uses++] = {&ranks[to].receivePort, within.bytesPerSecond};
    path[uses++] = {&hosts[m.hostOf(from)].memory, m.hostMemoryBytesPerSecond};
  } else {
    latency = m.interHost.latencySeconds;
    path[uses++] = {&hosts[m.hostOf(from)].nicOut, m.interHost.bytesPerSecond};
    path[uses++] = {&hosts[m.hostOf(to)].nicIn, m.interHost.bytesPerSecond};
    if (m.nicMemoryCopies > 0)
      path[uses++] = {&hosts[m.hostOf(to)].memory, m.hostMemoryBytesPerSecond / m.nicMemoryCopies};
    int sf = m.switchOf(m.hostOf(from)), st = m.switchOf(m.hostOf(to));
    if (sf != st) {
      latency += m.switchHopLatency;
      if (m.uplinkBytesPerSecond > 0) {
        path[uses++] = {&switches[sf].up, m.uplinkBytesPerSecond};
        path[uses++] = {&switches[st].down, m.uplinkBytesPerSecond};
      }
    }
  }
  // Each resource serves the message's bytes at its own rate as soon as it is free, and the
  // message has arrived once every resource has carried it (a fluid model). So a fast shared
  // resource (a host's memory) interleaves the transfers of several ranks, a slow one (a NIC)
  // serialises them, and a resource never idles while a transfer waits on another one.
  double done = at;
  for (int i = 0; i < uses; ++i) {
    Port& port = *path[i].port;
    port.freeAt = std::max(at, port.freeAt) + b / path[i].rate;
    done = std::max(done, port.freeAt);
  }
  *sendDone = done;
  return done + latency;
}

Request SimWorld::Impl::post(Plane plane, int from, int to, ConstBytes data, Tag tag) {
  auto state = std::make_shared<RequestState>();
  state->verb = "send to";
  state->tag = tag;
  state->bytes = state->moved = data.size();
  state->describer = &link(plane, from, to);
  double sendDone;
  Message message{
      tag, data.size(), transfer(plane, from, to, data.size(), ranks[from].clock, &sendDone), {}};
  ++messages;
  bytesSent += data.size();
  push(sendDone, from, state);
  Inbox& inbox = link(plane, to, from).inbox();
  if (!inbox.receives.empty()) {
    PostedReceive receive = std::move(inbox.receives.front());
    inbox.receives.pop_front();
    if (options.moveData && receive.data.size() == data.size() && !data.empty())
      std::memcpy(receive.data.data(), data.data(), data.size());
    deliver(to, from, message, receive);
  } else {
    if (options.moveData) message.payload.assign(data.begin(), data.end());
    inbox.messages.push_back(std::move(message));
  }
  return Request(state, progress[from].get());
}

Request SimWorld::Impl::receive(Plane plane, int at, int from, MutableBytes data, Tag tag) {
  auto state = std::make_shared<RequestState>();
  state->verb = "recv from";
  state->tag = tag;
  state->bytes = data.size();
  state->describer = &link(plane, at, from);
  PostedReceive receive{data, tag, ranks[at].clock, state};
  Inbox& inbox = link(plane, at, from).inbox();
  if (!inbox.messages.empty()) {
    Message message = std::move(inbox.messages.front());
    inbox.messages.pop_front();
    if (options.moveData && message.bytes == data.size() && !message.payload.empty())
      std::memcpy(data.data(), message.payload.data(), data.size());
    deliver(at, from, message, receive);
  } else {
    inbox.receives.push_back(std::move(receive));
  }
  return Request(state, progress[at].get());
}

// Completes a receive met by a message (the bytes, if any, already copied).
void SimWorld::Impl::deliver(int at, int from, Message& message, PostedReceive& receive) {
  std::exception_ptr error;
  if (message.tag != receive.tag || message.bytes != receive.data.size())
    error = std::make_exception_ptr(InternalError(detail::concat(
        receive.state->description(), ": rank ", from, " sent tag=", hexTag(message.tag), " ",
        message.bytes, " bytes (the ranks disagree on the algorithm)")));
  else
    receive.state->moved = message.bytes;
  push(std::max(message.arrival, receive.posted), at, receive.state, error);
}

void SimWorld::Impl::block() {
  Rank& me = ranks[current];
  me.state = State::Blocked;
  yield();
  if (!me.deadlock.empty()) {
    std::string why = std::move(me.deadlock);
    me.deadlock.clear();
    throw TimeoutError(why);
  }
}

void SimWorld::Impl::charge(double seconds) {
  Rank& me = ranks[current];
  me.clock += seconds;
  me.state = State::Ready;
  push(me.clock, current);
  yield();
}

void SimWorld::Impl::pollNow() { charge(0); }

void SimWorld::Impl::resume(int r, double time) {
  Rank& rank = ranks[r];
  rank.clock = std::max(rank.clock, time);
  rank.state = State::Running;
  current = r;
  rank.fiber = std::move(rank.fiber).resume();
  current = -1;
}

std::string SimWorld::Impl::describeStuck(int r) const {
  std::ostringstream out;
  out << "rank " << r << " waits for";
  int shown = 0;
  for (Plane plane : {Plane::Flat, Plane::WithinHost})
    for (int from = 0; from < size; ++from) {
      const Connection* link = linkIfAny(plane, r, from);
      const Inbox* inbox = link ? link->inboxIfAny() : nullptr;
      if (!inbox) continue;
      for (const auto& receive : inbox->receives) {
        if (shown++ < 3)
          out << (shown > 1 ? "," : "") << " rank " << from << " (tag=" << hexTag(receive.tag)
              << ", " << receive.data.size() << " bytes)";
      }
    }
  if (shown == 0) out << " a send to complete";
  return out.str();
}

// When no event is left, every rank still blocked waits for a message no rank will send. Wakes
// them with the whole picture, once; returns false when there were none.
bool SimWorld::Impl::releaseStuckRanks() {
  std::vector<int> stuck;
  for (int r = 0; r < size; ++r)
    if (ranks[r].state == State::Blocked) stuck.push_back(r);
  if (stuck.empty()) return false;
  std::ostringstream why;
  why << "simulated deadlock at " << std::setprecision(6) << ranks[stuck[0]].clock * 1e6
      << " us of virtual time: " << stuck.size() << " of " << size
      << " ranks wait for messages no rank will send; ";
  for (std::size_t i = 0; i < stuck.size() && i < 4; ++i)
    why << (i ? "; " : "") << describeStuck(stuck[i]);
  if (stuck.size() > 4) why << "; ...";
  for (int r : stuck) {
    ranks[r].deadlock = why.str();
    ranks[r].state = State::Ready;
    push(ranks[r].clock, r);
  }
  return true;
}

SimRun SimWorld::Impl::run(const std::function<void(Comm&)>& fn) {
  HVD_ENFORCE(events.empty() && current == -1, "SimWorld::run is not reentrant");
  for (auto& host : hosts) host = Host{};
  for (auto& sw : switches) sw = Switch{};
  messages = bytesSent = 0;
  for (auto& c : *connections) c.clear();
  for (int r = 0; r < size; ++r) {
    Rank& rank = ranks[r];
    rank.clock = 0;
    rank.sendPort.reset();
    rank.receivePort.reset();
    rank.error = nullptr;
    rank.deadlock.clear();
    rank.state = State::Ready;
    rank.fiber = ctx::fiber(std::allocator_arg, ctx::protected_fixedsize_stack(options.stackBytes),
                            [this, r, &fn](ctx::fiber&& back) {
                              scheduler = std::move(back);
                              Rank& me = ranks[r];
                              try {
                                fn(*me.comm);
                              } catch (const ctx::detail::forced_unwind&) {
                                throw;
                              } catch (...) {
                                me.error = std::current_exception();
                                me.errorTime = me.clock;
                              }
                              me.state = State::Finished;
                              return std::move(scheduler);
                            });
    push(0, r);
  }
  Meter meter(*this);
  ScopedWorkMeter installed(&meter);
  for (;;) {
    while (!events.empty()) {
      Event e = events.top();
      events.pop();
      Rank& rank = ranks[e.rank];
      if (e.request) {
        e.request->error = e.error;
        e.request->done = true;
        if (rank.state == State::Blocked) resume(e.rank, e.time);
      } else if (rank.state == State::Ready) {
        resume(e.rank, e.time);
      }
    }
    if (!releaseStuckRanks()) break;
  }
  SimRun result;
  result.messages = messages;
  result.bytes = bytesSent;
  std::exception_ptr first;
  double firstTime = 0;
  bool firstIsDeadlock = true;
  for (int r = 0; r < size; ++r) {
    Rank& rank = ranks[r];
    result.finishSeconds.push_back(rank.clock);
    result.seconds = std::max(result.seconds, rank.clock);
    if (!rank.error) continue;
    bool deadlock = false;
    try {
      std::rethrow_exception(rank.error);
    } catch (const TimeoutError& e) {
      deadlock = std::string(e.what()).find("simulated deadlock") != std::string::npos;
    } catch (...) {}
    // The root cause: a rank's own failure before any deadlock it caused, earliest first.
    if (!first || (firstIsDeadlock && !deadlock) ||
        (firstIsDeadlock == deadlock && rank.errorTime < firstTime)) {
      first = rank.error;
      firstTime = rank.errorTime;
      firstIsDeadlock = deadlock;
    }
  }
  if (first) std::rethrow_exception(first);
  return result;
}

SimWorld::SimWorld(int size, SimOptions options)
    : impl_(std::make_unique<Impl>(size, std::move(options))) {}
SimWorld::~SimWorld() = default;
int SimWorld::size() const { return impl_->size; }
const SimOptions& SimWorld::options() const { return impl_->options; }
SimRun SimWorld::run(const std::function<void(Comm&)>& fn) { return impl_->run(fn); }

}  // namespace hvd::collectives::sim
