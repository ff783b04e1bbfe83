// Fuzzes the hostfile parser (launcher/hostfile.h): any text is a non-empty host list or an
// InvalidArgument naming the file; parsed hosts are distinct and have 1..2^20 slots.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "common/error.h"
#include "launcher/hostfile.h"

using namespace hvd::launcher;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<HostSlots> hosts;
  try {
    hosts = parseHostfile(text, "fuzz.hosts");
  } catch (const hvd::InvalidArgument& e) {
    if (std::string(e.what()).find("fuzz.hosts") == std::string::npos) abort();
    return 0;
  }
  std::set<std::string> seen;
  if (hosts.empty()) abort();
  for (const auto& h : hosts)
    if (h.host.empty() || h.slots < 1 || h.slots > (1 << 20) || !seen.insert(h.host).second)
      abort();
  return 0;
}
