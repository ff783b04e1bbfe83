// Where hvdrun's rendezvous server listens first: one rule for static and elastic jobs (the
// launch pipeline, launcher.cc, applies it to what the job's LaunchStrategy knows of its hosts).
// Never on every interface (0.0.0.0): the job secret guards the port, but it is not offered on
// networks no worker uses.
//  1. Every worker on this machine: loopback.
//  2. --network-interface's interface for this machine, when given: its address.
//  3. Remote hosts known before the server starts (a static job's, checked by the preflight):
//     the address this machine reaches the first of them from. Every rank is told this one
//     address at start, so a host reached from another address gets a warning, and a loopback
//     address (a remote-looking name that is this machine) is refused.
//  4. Remote hosts that join later (an elastic job's): loopback first. The interface each
//     joining host reaches this machine on is not known now, so as each joins the server also
//     listens on the address hvdrun's SSH connection to it comes from
//     (RendezvousServer::listenAlso; elastic_workers.h).
// Pure apart from reading this machine's interfaces (rule 2) and logging (rule 3's warning).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hvd::launcher {

struct HostReach {
  bool remote = false;    // some worker may run on another host
  std::string thisHost;   // this machine's name in the host list ("": none), for messages
  std::string interface;  // --network-interface's for this machine; "": automatic
  // Rule 3's hosts, in host order: host -> this machine's address on hvdrun's connection to it.
  std::vector<std::pair<std::string, std::string>> routes;
};

// Throws InvalidArgument for rule 3's loopback address and for an interface this machine lacks
// (naming the interfaces it has).
std::string rendezvousBindAddress(const HostReach& reach);

}  // namespace hvd::launcher
