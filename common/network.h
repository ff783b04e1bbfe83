// This machine's network interfaces and addresses, and name resolution, for choosing the
// addresses a multi-host job listens on. Reads the kernel's tables (getifaddrs); no traffic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hvd::net {

struct InterfaceAddress {
  std::string interface;  // "eth0"
  std::string address;    // "10.0.0.2" or "fe80::1"
  bool ipv6 = false;
  bool loopback = false;
};

std::vector<InterfaceAddress> interfaceAddresses();
// Names of every interface that has an address, sorted, without repeats: "eth0, lo".
std::string interfaceNames();

// The IPv4 address of `iface` (else its first IPv6 one). Throws InvalidArgument naming `host`
// (for messages only), the interface and the interfaces that do exist.
std::string addressOfInterface(const std::string& iface, const std::string& host);

// Numeric addresses `host` resolves to; empty when it does not resolve.
std::vector<std::string> resolve(const std::string& host);

bool isLoopback(const std::string& address);  // 127.0.0.0/8 or ::1

// A TCP port no socket of this machine uses now (the kernel's pick for port 0); another program
// may take it before the caller's user does. Throws IoError.
uint16_t unusedTcpPort();

// The address of this machine that the kernel's routing table would send packets to `host`
// from (a UDP socket's connect() followed by getsockname(): no packet leaves). Throws IoError
// naming `host` when it does not resolve or no route reaches it.
std::string sourceAddressTowards(const std::string& host);

// True if `host` is a loopback name or address, this machine's hostname, or one of `addresses`
// (what `host` resolves to) is loopback or an address of this machine's interfaces.
bool isThisMachine(const std::string& host, const std::vector<std::string>& addresses);
bool isThisMachine(const std::string& host);  // resolves `host` itself

}  // namespace hvd::net
