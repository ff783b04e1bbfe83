// Parsing of `-H [user@]host[:slots][,...]`, where host may be a name, an IPv4 literal or a
// bracketed IPv6 literal ("[::1]:2"); no slot count means one slot. Pure: no I/O.
#pragma once

#include <string>
#include <vector>

namespace hvd::launcher {

struct HostSlots {
  HostSlots(std::string h = "", int s = 1, std::string u = "")
      : host(std::move(h)), slots(s), user(std::move(u)) {}
  std::string host;  // without brackets for IPv6
  int slots;
  std::string user;  // from user@host; empty for the current user
};

// Throws InvalidArgument naming the offending entry: empty entries, an empty or non-numeric
// slot count, zero slots, more than one ':' outside brackets, an unclosed bracket, a bracket
// inside the host name, an empty user or host, a host listed twice.
std::vector<HostSlots> parseHostList(const std::string& spec);

// True if `word` has the shape host:slots; used to catch "-H a:1 b:1 cmd", where the shell split
// the host list and b:1 would otherwise run as the command.
bool looksLikeHostSlots(const std::string& word);

std::string describeHosts(const std::vector<HostSlots>& hosts);  // "a:2,b:2"

}  // namespace hvd::launcher
