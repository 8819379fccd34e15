// Host names and IPv4 addresses: the one resolver the rendezvous, the job set-up and the group channel use.
#pragma once

#include <optional>
#include <string>

namespace dlaunch {

// `host` (a name, or an address in dotted form) as a dotted IPv4 address: its first IPv4 address
// (getaddrinfo, AF_INET); nullopt when it has none.
std::optional<std::string> resolve_ipv4(const std::string& host);

}  // namespace dlaunch
