// Fuzzes the -H host list parser (launcher/host_spec.h): any text is a host list or an
// InvalidArgument. A parsed list has non-empty, distinct hosts with 1..2^20 slots, and
// describeHosts() of it (what messages print) parses back to the same list.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "common/error.h"
#include "launcher/host_spec.h"

using namespace hvd::launcher;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  (void)looksLikeHostSlots(spec);
  std::vector<HostSlots> hosts;
  try {
    hosts = parseHostList(spec);
  } catch (const hvd::InvalidArgument&) {
    return 0;
  }
  std::set<std::string> seen;
  for (const auto& h : hosts)
    if (h.host.empty() || h.slots < 1 || h.slots > (1 << 20) || !seen.insert(h.host).second)
      abort();
  auto again = parseHostList(describeHosts(hosts));
  if (again.size() != hosts.size()) abort();
  for (std::size_t i = 0; i < hosts.size(); ++i)
    if (again[i].host != hosts[i].host || again[i].slots != hosts[i].slots ||
        again[i].user != hosts[i].user)
      abort();
  return 0;
}
