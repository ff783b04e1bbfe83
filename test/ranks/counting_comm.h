// A Comm over another Comm's connections that records what this rank sends: to which peers, how
// many messages and how many bytes. Tests tell algorithms apart by this traffic, which each
// algorithm file states (rounds, bytes per rank).
// Thread model: as a Comm, used by the thread that owns the inner Comm, which must outlive it.
#pragma once

#include <cstddef>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/transport/comm.h"

namespace hvd::test {

struct Traffic {
  int messages = 0;
  std::size_t bytes = 0;
  std::set<int> peers;  // ranks this rank sent to

  bool operator==(const Traffic& o) const {
    return messages == o.messages && bytes == o.bytes && peers == o.peers;
  }
};

inline std::string describe(const Traffic& t) {
  std::ostringstream out;
  out << t.messages << " messages, " << t.bytes << " bytes, to {";
  for (int p : t.peers) out << (p == *t.peers.begin() ? "" : ",") << p;
  out << "}";
  return out.str();
}

class CountingConnection : public collectives::Connection {
 public:
  CountingConnection(collectives::Connection& inner, Traffic& traffic)
      : inner_(inner), traffic_(traffic) {}
  int peerRank() const override { return inner_.peerRank(); }
  std::string peerAddress() const override { return inner_.peerAddress(); }
  collectives::Request isend(collectives::ConstBytes data, collectives::Tag tag) override {
    ++traffic_.messages;
    traffic_.bytes += data.size();
    traffic_.peers.insert(inner_.peerRank());
    return inner_.isend(data, tag);
  }
  collectives::Request irecv(collectives::MutableBytes data, collectives::Tag tag) override {
    return inner_.irecv(data, tag);
  }
  void close() override {}  // the inner Comm closes the real connection

 private:
  collectives::Connection& inner_;
  Traffic& traffic_;
};

// The same ranks as `comm`, counting into `traffic`. Its operations take their own sequence
// numbers: use one of the two Comms at a time, in the same order on every rank.
inline std::unique_ptr<collectives::Comm> countingComm(collectives::Comm& comm, Traffic& traffic) {
  std::vector<std::shared_ptr<collectives::Connection>> links(comm.size());
  for (int r = 0; r < comm.size(); ++r)
    if (r != comm.rank()) links[r] = std::make_shared<CountingConnection>(comm.peer(r), traffic);
  // Not owned: the inner Comm keeps its transport alive.
  std::shared_ptr<collectives::ProgressEngine> progress(
      std::shared_ptr<collectives::ProgressEngine>(), comm.progress());
  auto counting = std::make_unique<collectives::Comm>(comm.rank(), comm.size(), std::move(links),
                                                      comm.timeout(), progress);
  counting->setPipelineSegmentBytes(comm.pipelineSegmentBytes());
  counting->setBuffersPerPeer(comm.buffersPerPeer());
  return counting;
}

}  // namespace hvd::test
