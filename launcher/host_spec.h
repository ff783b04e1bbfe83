// Parsing of `-H host:slots[,host:slots]`. Pure: no I/O.
#pragma once

#include <string>
#include <vector>

namespace hvd::launcher {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// Throws InvalidArgument naming the offending entry: empty entries, a missing or non-numeric
// slot count, zero slots, more than one ':' (IPv6 comes with the multi-host work), a host listed
// twice.
std::vector<HostSlots> parseHostList(const std::string& spec);

// True if `word` has the shape host:slots; used to catch "-H a:1 b:1 cmd", where the shell split
// the host list and b:1 would otherwise run as the command.
bool looksLikeHostSlots(const std::string& word);

std::string describeHosts(const std::vector<HostSlots>& hosts);  // "a:2,b:2"

}  // namespace hvd::launcher
