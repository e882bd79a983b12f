#pragma once
// The shared net layer: how ncclsmoke spells, splits and parses socket addresses. The store
// (server, client, dialect probe), the mesh probe, the peer watch, the socket transport and the
// run session all use these, so an address reads the same in every message and a "host:port"
// that one part writes another part can split.
//
// The layer is two headers: this one (addresses, no connect, no store types) and connect.h (the
// classified connect under a deadline: connect_tcp for the store's StoreError, try_connect_tcp for
// callers that map the failure class to their own error). Both live in ncclsmoke::rendezvous
// (STYLE.md: one namespace per folder) rather than a nested namespace, so existing callers of
// format_address / split_host_port / interface_of kept compiling when the copies were merged here.
//
// Spelling, everywhere: "1.2.3.4:5", "[fd00::1]:5", "[fe80::1%eth0]:5"; a v4-mapped IPv6 address
// (what a dual-stack listener reports for an IPv4 peer) is shown as the IPv4 address it maps.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ncclsmoke::rendezvous {

// "ip:port" / "[ip6]:port" (with "%scope" when the address has one) for a socket address; an
// unknown family reads "(unknown address family N)". `len` guards short buffers.
std::string format_address(const sockaddr* addr, socklen_t len);

// Splits "host:port" / "[ip6]:port" (the inverse of join_host_port). False (host and port left
// as they were) for: no port, an empty host, a port that is not 1..65535 in plain digits, an
// unbracketed host with more than one ':' ("fd00::1:80" is ambiguous), a bracket not closed.
bool split_host_port(std::string_view text, std::string& host, uint16_t& port);

// "host:port", with an IPv6 host in brackets ("[::1]:5").
std::string join_host_port(std::string_view host, uint16_t port);

// The host of "host:port" when it splits, else the text itself ("10.0.0.7:5" -> "10.0.0.7").
std::string host_part(const std::string& host_port);

// Whether `text` is a numeric IPv4 or IPv6 address (no resolver is asked).
bool is_numeric_address(const std::string& text);

// Fills `ss` (family, address, port) from a numeric IPv4 or IPv6 literal ("10.0.0.7", "::1", no
// brackets). False, `ss` zeroed, for anything else (a name is never resolved here). `len`, when
// given, receives the size of the filled sockaddr_in / sockaddr_in6.
bool fill_sockaddr(const std::string& ip, sockaddr_storage& ss, uint16_t port = 0,
                   socklen_t* len = nullptr);

// Name of the interface that owns this local address (getifaddrs), "" when none matches. A
// v4-mapped IPv6 address belongs to the interface that owns the IPv4 address.
std::string interface_of(const sockaddr* addr);

// The speed the interface `name` reports, in Mb/s (<sysfs_root>/class/net/<name>/speed); 0 when
// unknown (no such interface, a virtual one that reports none, or a name that is not a plain file
// name). Tests point `sysfs_root` at a copied layout (NCCLSMOKE_SYSFS_ROOT).
int interface_speed_mbps(const std::string& name, const std::string& sysfs_root = "/sys");

// The source address this host would use to reach host:port, without brackets ("10.0.0.7",
// "fd00::7"): a connected UDP socket sends nothing, but the kernel picks the route and the source
// address. "" when the name does not resolve or no route exists. The name lookup is
// getaddrinfo's, unbounded: call it with a numeric address or a name already resolved once.
std::string route_source_address(const std::string& host, uint16_t port);

// The one port grammar (flags, launcher variables, "host:port"): plain decimal digits, nothing
// around them, 1..65535. Port 0 ("pick any") is never written by a user: an unset flag means it.
// nullopt for anything else ("", " 1", "+1", "0", "65536", "tcp://1.2.3.4:29500").
std::optional<uint16_t> parse_port(std::string_view text);

// The one port-range grammar (--mesh-port-range): "N" (the single port N, so lo == hi == N) or
// "A-B" with A <= B, each a port of parse_port. Returns "" and sets lo/hi on success, else one
// line that quotes the text and says what is accepted (lo and hi are then 0/0). An empty text is
// refused too: a caller whose flag was not given leaves the range 0/0 (ephemeral) itself.
std::string parse_port_range(std::string_view text, uint16_t& lo, uint16_t& hi);

}  // namespace ncclsmoke::rendezvous
