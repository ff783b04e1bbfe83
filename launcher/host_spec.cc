#include "launcher/host_spec.h"

#include <regex>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/params.h"

namespace hvd::launcher {

namespace {

HostSlots parseEntry(const std::string& e, const std::string& where) {
  if (e.empty()) throw InvalidArgument(where + " is empty (write host:slots,host:slots)");
  HostSlots h;
  std::string rest = e;
  if (auto at = rest.find('@'); at != std::string::npos) {
    h.user = rest.substr(0, at);
    rest = rest.substr(at + 1);
    if (h.user.empty()) throw InvalidArgument(where + " '" + e + "' has an empty user before '@'");
  }
  std::string slots;
  if (!rest.empty() && rest[0] == '[') {  // [IPv6]:slots
    auto close = rest.find(']');
    if (close == std::string::npos)
      throw InvalidArgument(where + " '" + e + "' opens '[' without closing it");
    h.host = rest.substr(1, close - 1);
    std::string after = rest.substr(close + 1);
    if (!after.empty() && after[0] != ':')
      throw InvalidArgument(where + " '" + e + "' has '" + after +
                            "' after ']' (write [addr]:slots)");
    if (!after.empty()) slots = after.substr(1);
    if (!after.empty() && slots.empty())
      throw InvalidArgument(where + " '" + e + "' has an empty slot count");
  } else {
    auto colon = rest.find(':');
    if (colon != std::string::npos && rest.find(':', colon + 1) != std::string::npos)
      throw InvalidArgument(where + " '" + e +
                            "' has more than one ':' (write host:slots; bracket IPv6 addresses)");
    h.host = rest.substr(0, colon);
    if (colon != std::string::npos) {
      slots = rest.substr(colon + 1);
      if (slots.empty()) throw InvalidArgument(where + " '" + e + "' has an empty slot count");
    }
  }
  if (h.host.empty()) throw InvalidArgument(where + " '" + e + "' has no host name");
  if (h.host.find_first_of("[]") != std::string::npos)
    throw InvalidArgument(where + " '" + e +
                          "' has '[' or ']' inside the host name (bracket a whole IPv6 address: "
                          "[addr]:slots)");
  if (!slots.empty())
    h.slots = static_cast<int>(params::parseInt(slots, 1, 1 << 20, where + " '" + e + "': slots"));
  return h;
}

}  // namespace

std::vector<HostSlots> parseHostList(const std::string& spec) {
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  std::vector<std::string> entries;
  std::string entry;
  std::stringstream in(spec);
  while (std::getline(in, entry, ',')) entries.push_back(entry);
  if (spec.empty() || spec.back() == ',') entries.push_back("");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::string where = detail::concat("-H '", spec, "': entry ", i + 1);
    HostSlots h = parseEntry(entries[i], where);
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
  for (const auto& h : hosts) {
    if (!out.empty()) out.append(",");
    if (!h.user.empty()) out.append(h.user).append("@");
    bool ipv6 = h.host.find(':') != std::string::npos;
    out.append(ipv6 ? "[" : "").append(h.host).append(ipv6 ? "]" : "");
    out.append(":").append(std::to_string(h.slots));
  }
  return out;
}

}  // namespace hvd::launcher
