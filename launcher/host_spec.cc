#include "launcher/host_spec.h"

#include <regex>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/params.h"

namespace hvd::launcher {

std::vector<HostSlots> parseHostList(const std::string& spec) {
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  std::vector<std::string> entries;
  std::string entry;
  std::stringstream in(spec);
  while (std::getline(in, entry, ',')) entries.push_back(entry);
  if (spec.empty() || spec.back() == ',') entries.push_back("");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    std::string where = detail::concat("-H '", spec, "': entry ", i + 1);
    if (e.empty()) throw InvalidArgument(where + " is empty (write host:slots,host:slots)");
    auto colon = e.find(':');
    if (colon == std::string::npos)
      throw InvalidArgument(where + " '" + e + "' has no slot count (write " + e + ":N)");
    if (e.find(':', colon + 1) != std::string::npos)
      throw InvalidArgument(where + " '" + e + "' has more than one ':' (write host:slots)");
    HostSlots h;
    h.host = e.substr(0, colon);
    if (h.host.empty()) throw InvalidArgument(where + " '" + e + "' has no host name");
    h.slots = static_cast<int>(params::parseInt(e.substr(colon + 1), 1, 1 << 20,
                                                where + " '" + e + "': slots"));
    if (!seen.insert(h.host).second)
      throw InvalidArgument(where + ": host '" + h.host +
                            "' is listed twice (give it once with the total slot count)");
    hosts.push_back(h);
  }
  return hosts;
}

bool looksLikeHostSlots(const std::string& word) {
  static const std::regex kShape(R"(^[A-Za-z0-9_.\-]+:[0-9]+(,[A-Za-z0-9_.\-]+:[0-9]+)*,?$)");
  return std::regex_match(word, kShape);
}

std::string describeHosts(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const auto& h : hosts) out += (out.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
  return out;
}

}  // namespace hvd::launcher
