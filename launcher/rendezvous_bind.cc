#include "launcher/rendezvous_bind.h"

#include "common/error.h"
#include "common/logging.h"
#include "common/network.h"

namespace hvd::launcher {

std::string rendezvousBindAddress(const HostReach& r) {
  if (!r.remote) return "127.0.0.1";
  if (!r.interface.empty())
    return net::addressOfInterface(r.interface, r.thisHost.empty() ? "(hvdrun's)" : r.thisHost);
  if (r.routes.empty()) return "127.0.0.1";  // rule 4: listenAlso as hosts join
  const auto& [first, chosen] = r.routes.front();
  for (const auto& [host, address] : r.routes)
    if (address != chosen)
      log::logger("launcher")
          ->warn(
              "this machine reaches {} from {} but {} from {}; the rendezvous listens on {} only "
              "(choose with --network-interface)",
              first, chosen, host, address, chosen);
  if (net::isLoopback(chosen))
    throw InvalidArgument("a multi-host job cannot use the loopback address " + chosen +
                          "; choose an interface with --network-interface");
  return chosen;
}

}  // namespace hvd::launcher
