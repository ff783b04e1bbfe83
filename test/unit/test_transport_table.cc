// The transport table without sockets: which entry may link which ranks under HVD_TRANSPORT,
// the "shm or fail" refusal, and the chooser's collective fallback, over a table of fakes.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "collectives/transport/device.h"
#include "runtime/transport_table.h"

using namespace hvd;
using namespace hvd::runtime;

namespace {

Config configOf(Transport transport, int size, int localSize) {
  Config c;
  c.transport = transport;
  c.topology.size = size;
  c.topology.localSize = localSize;
  c.topology.hostname = "hostA";
  return c;
}

const TransportEntry& entryOf(Transport kind) {
  for (const TransportEntry& e : transportTable())
    if (e.kind == kind) return e;
  FAIL("no entry for " << transportName(kind));
  throw;
}

// The fakes' record of what was connected; reset by each test.
int gFirstTries = 0, gSecondTries = 0;

Linked firstUnavailable(const Config&, const LinkSet&, const LinkSetup&) {
  ++gFirstTries;
  throw collectives::TransportUnavailable("first unavailable: rank 1: no room");
}
Linked secondWorks(const Config&, const LinkSet&, const LinkSetup&) {
  ++gSecondTries;
  return {nullptr, Transport::Tcp, "second"};
}
std::string always(const Config&, const LinkSet&) { return ""; }

const std::vector<TransportEntry> kFakes = {{Transport::Shm, "first", always, firstUnavailable},
                                            {Transport::Tcp, "second", always, secondWorks}};

}  // namespace

TEST_CASE("transport table: shared memory first, then TCP") {
  const auto& table = transportTable();
  REQUIRE(table.size() == 2);
  CHECK(table[0].kind == Transport::Shm);
  CHECK(table[1].kind == Transport::Tcp);
}

TEST_CASE("transport table: which entry may link which ranks") {
  const TransportEntry& shm = entryOf(Transport::Shm);
  const TransportEntry& tcp = entryOf(Transport::Tcp);
  LinkSet oneHost{.rank = 0, .size = 4, .sameHost = true};
  LinkSet twoHosts{.rank = 0, .size = 4, .sameHost = false};
  LinkSet alone{.rank = 0, .size = 1, .sameHost = true};

  Config autoOne = configOf(Transport::Auto, 4, 4);
  CHECK(shm.whyNot(autoOne, oneHost).empty());
  CHECK(tcp.whyNot(autoOne, oneHost).empty());
  CHECK_FALSE(shm.whyNot(autoOne, alone).empty());
  Config autoTwo = configOf(Transport::Auto, 4, 2);
  CHECK_FALSE(shm.whyNot(autoTwo, twoHosts).empty());
  CHECK(tcp.whyNot(autoTwo, twoHosts).empty());
  CHECK(shm.whyNot(configOf(Transport::Tcp, 4, 4), oneHost) == "HVD_TRANSPORT=tcp");
  CHECK(tcp.whyNot(configOf(Transport::Shm, 4, 4), oneHost) == "HVD_TRANSPORT=shm");
}

TEST_CASE("transport table: HVD_TRANSPORT=shm on several hosts fails before connecting") {
  TransportChooser chooser;
  Config config = configOf(Transport::Shm, 4, 2);
  bool noted = false;
  try {
    chooser.connect(config, {.rank = 0, .size = 4, .sameHost = false}, {},
                    [&](const std::string&, const TransportEntry&) { noted = true; });
    FAIL("connect did not throw");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()) ==
          "HVD_TRANSPORT=shm, but the job's 4 ranks are not all on one host (2 on hostA): "
          "shared memory links only ranks of one host");
  }
  CHECK_FALSE(noted);
}

TEST_CASE("transport table: an unavailable entry falls back, and is not tried again") {
  gFirstTries = gSecondTries = 0;
  TransportChooser chooser(kFakes);
  Config config = configOf(Transport::Auto, 2, 2);
  LinkSet set{.rank = 0, .size = 2, .sameHost = true};
  std::vector<std::string> notes;
  auto note = [&](const std::string& reason, const TransportEntry& next) {
    notes.push_back(reason + " -> " + next.label);
  };
  Linked first = chooser.connect(config, set, {}, note);
  CHECK(first.description == "second");
  REQUIRE(notes == std::vector<std::string>{"first unavailable: rank 1: no room -> second"});
  Linked again = chooser.connect(config, set, {}, note);
  CHECK(again.transport == Transport::Tcp);
  CHECK(gFirstTries == 1);
  CHECK(gSecondTries == 2);
  CHECK(notes.size() == 1);
}

TEST_CASE("transport table: a transport the job named is not left") {
  gFirstTries = gSecondTries = 0;
  TransportChooser chooser(kFakes);
  Config config = configOf(Transport::Shm, 2, 2);
  CHECK_THROWS_AS(chooser.connect(config, {.rank = 0, .size = 2, .sameHost = true}, {},
                                  [](const std::string&, const TransportEntry&) {}),
                  collectives::TransportUnavailable);
  CHECK(gSecondTries == 0);
}
