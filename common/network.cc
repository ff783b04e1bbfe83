#include "common/network.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "common/error.h"

namespace hvd::net {
namespace {

std::string numeric(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof text);
  return text;
}

}  // namespace

std::vector<InterfaceAddress> interfaceAddresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> guard(list, ::freeifaddrs);
  std::vector<InterfaceAddress> out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
      continue;
    out.push_back({i->ifa_name, numeric(i->ifa_addr), i->ifa_addr->sa_family == AF_INET6,
                   (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  return out;
}

std::string interfaceNames() {
  std::set<std::string> names;
  for (const auto& a : interfaceAddresses()) names.insert(a.interface);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string addressOfInterface(const std::string& iface, const std::string& host) {
  std::string v6;
  for (const auto& a : interfaceAddresses()) {
    if (a.interface != iface) continue;
    if (!a.ipv6) return a.address;
    if (v6.empty() && a.address.rfind("fe80:", 0) != 0) v6 = a.address;
  }
  if (!v6.empty()) return v6;
  throw InvalidArgument("host " + host + ": network interface '" + iface +
                        "' not found or has no address (interfaces: " + interfaceNames() + ")");
}

std::vector<std::string> resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return {};
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
  std::vector<std::string> out;
  for (addrinfo* a = found; a; a = a->ai_next) {
    std::string text = numeric(a->ai_addr);
    if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
  }
  return out;
}

std::string sourceAddressTowards(const std::string& host) {
  auto addresses = resolve(host);
  if (addresses.empty()) throw IoError("cannot resolve host '" + host + "'");
  std::string last;
  for (const auto& address : addresses) {
    sockaddr_storage to{};
    socklen_t length = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&to);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&to);
    if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(9);  // any port: a UDP connect sends nothing
      length = sizeof *v4;
    } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(9);
      length = sizeof *v6;
    } else {
      continue;
    }
    int fd = ::socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage from{};
    socklen_t fromLength = sizeof from;
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&to), length) == 0 &&
              ::getsockname(fd, reinterpret_cast<sockaddr*>(&from), &fromLength) == 0;
    last = std::strerror(errno);
    ::close(fd);
    if (ok) return numeric(reinterpret_cast<const sockaddr*>(&from));
  }
  throw IoError("no route from this machine to host '" + host + "'" +
                (last.empty() ? "" : " (" + last + ")"));
}

uint16_t unusedTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw IoError(std::string("cannot pick a free port: socket: ") + std::strerror(errno));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof any;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&any), &length) == 0;
  std::string why = ok ? "" : std::strerror(errno);
  ::close(fd);
  if (!ok) throw IoError("cannot pick a free port: " + why);
  return ntohs(any.sin_port);
}

bool isLoopback(const std::string& a) { return a.rfind("127.", 0) == 0 || a == "::1"; }

bool isThisMachine(const std::string& host) { return isThisMachine(host, resolve(host)); }

bool isThisMachine(const std::string& host, const std::vector<std::string>& addresses) {
  char name[256] = {};
  if (host == "localhost" || isLoopback(host) ||
      (::gethostname(name, sizeof name - 1) == 0 && host == name))
    return true;
  auto local = interfaceAddresses();
  for (const auto& address : addresses) {
    if (isLoopback(address)) return true;
    for (const auto& a : local)
      if (a.address == address) return true;
  }
  return false;
}

}  // namespace hvd::net
