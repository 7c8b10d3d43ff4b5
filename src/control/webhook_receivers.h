// Which receivers weftd may call for a tenant's webhooks, so that a tenant cannot use webhooks to
// probe or reach what weftd's host can (issue 42): the admin lists receivers by host AND port
// (weftd --webhook-allow HOST:PORT,...; none by default), a URL must name one of them, and at
// each delivery the host's resolved address is checked and pinned for the connection — a private,
// loopback, link-local or cloud-metadata address only when the admin listed that very address
// with the port, so a name that resolves (or is rebound) to 169.254.169.254 or 10.x is refused.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft {

// One receiver the admin allowed.
struct WebhookReceiver {
  std::string host;  // a name (compared case-insensitively) or an IP literal, IPv6 unbracketed
  int port = 0;      // 1..65535
};

// Parses weftd --webhook-allow's entries: "host:port", "[ipv6]:port". InvalidArgument naming the
// entry and the problem (no port, a port outside 1..65535, an empty host, a control character).
absl::StatusOr<std::vector<WebhookReceiver>> ParseWebhookAllow(
    const std::vector<std::string>& entries);

// The parts of a receiver's URL.
struct WebhookUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // without brackets
  int port = 0;        // the scheme's default when the URL has none
  std::string path;    // "/" at least, with any query
};

// Parses `url` as http(s)://host[:port][/path] with host and port one of `allowed`.
// InvalidArgument naming the problem: another scheme, user information, a control character or
// space, a port outside 1..65535, a receiver not allowed, over 2,048 bytes.
absl::StatusOr<WebhookUrl> ParseWebhookUrl(const std::string& url,
                                           const std::vector<WebhookReceiver>& allowed);

// True for an address no webhook may reach unless the admin lists it: unspecified, loopback,
// private (RFC 1918, RFC 4193 fc00::/7), shared (100.64.0.0/10), link-local (169.254.0.0/16,
// fe80::/10, where cloud metadata services answer), benchmarking, multicast and reserved ranges;
// an IPv4-mapped IPv6 address as its IPv4 one. False for text that is no IP address.
bool IsInternalAddress(const std::string& ip);

// The address to connect to for `url` (parsed by ParseWebhookUrl against `allowed`): the first
// address its host resolves to that is public, or that is itself listed in `allowed` with the
// URL's port. NotFound when the host does not resolve; PermissionDenied naming the addresses
// when none may be called.
absl::StatusOr<std::string> ResolveReceiver(const WebhookUrl& url,
                                            const std::vector<WebhookReceiver>& allowed);

}  // namespace weft
