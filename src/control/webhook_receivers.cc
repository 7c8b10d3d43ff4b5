#include "control/webhook_receivers.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft {
namespace {

constexpr size_t kMaxUrlBytes = 2048;

absl::Status BadUrl(const std::string& why) { return absl::InvalidArgumentError(why); }

// Splits "host:port" or "[ipv6]:port" (port may be empty when `authority` has none) into `host`
// (unbracketed) and `port`; false with `why` for an unclosed bracket or trailing characters.
bool SplitAuthority(const std::string& authority, std::string* host, std::string* port,
                    std::string* why) {
  port->clear();
  if (!authority.empty() && authority[0] == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) {
      *why = "has an unclosed '[' in its host";
      return false;
    }
    *host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') {
        *why = "has characters after its IPv6 host";
        return false;
      }
      *port = authority.substr(close + 2);
    }
    return true;
  }
  const size_t colon = authority.find(':');
  *host = authority.substr(0, colon);
  if (colon != std::string::npos) *port = authority.substr(colon + 1);
  return true;
}

bool ParsePort(const std::string& text, int* port) {
  return absl::SimpleAtoi(text, port) && *port >= 1 && *port <= 65535;
}

bool SameHost(const std::string& a, const std::string& b) {
  return absl::AsciiStrToLower(a) == absl::AsciiStrToLower(b);
}

bool Listed(const std::vector<WebhookReceiver>& allowed, const std::string& host, int port) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const WebhookReceiver& r) {
    return r.port == port && SameHost(r.host, host);
  });
}

// Whether the IPv4 address `a` (host byte order) is in a range no webhook may reach unlisted.
bool InternalV4(uint32_t a) {
  struct Range {
    uint32_t net;
    int bits;
  };
  static constexpr Range kRanges[] = {
      {0x00000000, 8},   // 0.0.0.0/8: this network
      {0x0A000000, 8},   // 10.0.0.0/8: private
      {0x64400000, 10},  // 100.64.0.0/10: shared (carrier-grade NAT)
      {0x7F000000, 8},   // 127.0.0.0/8: loopback
      {0xA9FE0000, 16},  // 169.254.0.0/16: link-local, cloud metadata
      {0xAC100000, 12},  // 172.16.0.0/12: private
      {0xC0000000, 24},  // 192.0.0.0/24: IETF protocol assignments
      {0xC0A80000, 16},  // 192.168.0.0/16: private
      {0xC6120000, 15},  // 198.18.0.0/15: benchmarking
      {0xE0000000, 4},   // 224.0.0.0/4: multicast
      {0xF0000000, 4},   // 240.0.0.0/4: reserved, broadcast
  };
  return std::any_of(std::begin(kRanges), std::end(kRanges), [&](const Range& r) {
    return (a >> (32 - r.bits)) == (r.net >> (32 - r.bits));
  });
}

}  // namespace

absl::StatusOr<std::vector<WebhookReceiver>> ParseWebhookAllow(
    const std::vector<std::string>& entries) {
  std::vector<WebhookReceiver> allowed;
  for (const std::string& entry : entries) {
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("--webhook-allow entry '", entry, "' ", why,
                                                     " (write HOST:PORT or [IPV6]:PORT)"));
    };
    if (std::any_of(entry.begin(), entry.end(),
                    [](unsigned char c) { return c <= 0x20 || c >= 0x7f; })) {
      return bad("has a space, a control character or a byte that is not ASCII");
    }
    WebhookReceiver r;
    std::string port, why;
    if (!SplitAuthority(entry, &r.host, &port, &why)) return bad(why);
    if (r.host.empty()) return bad("has no host");
    if (port.empty()) return bad("has no port: receivers are allowed by host and port");
    if (!ParsePort(port, &r.port)) return bad("has a port outside 1..65535");
    allowed.push_back(std::move(r));
  }
  return allowed;
}

absl::StatusOr<WebhookUrl> ParseWebhookUrl(const std::string& url,
                                           const std::vector<WebhookReceiver>& allowed) {
  if (url.size() > kMaxUrlBytes) return BadUrl("is over 2048 bytes");
  for (unsigned char c : url) {
    if (c <= 0x20 || c >= 0x7f) {
      return BadUrl("must be ASCII without spaces or control characters (percent-encode them)");
    }
  }
  WebhookUrl u;
  const size_t sep = url.find("://");
  u.scheme = sep == std::string::npos ? "" : absl::AsciiStrToLower(url.substr(0, sep));
  if (u.scheme != "http" && u.scheme != "https")
    return BadUrl("must start with http:// or https://");
  const std::string rest = url.substr(sep + 3);
  const size_t slash = rest.find_first_of("/?#");
  const std::string authority = rest.substr(0, slash);
  u.path = slash == std::string::npos ? "/" : rest.substr(slash);
  if (u.path[0] != '/') u.path = "/" + u.path;
  if (u.path.find('#') != std::string::npos) return BadUrl("must not have a fragment (#)");
  if (authority.find('@') != std::string::npos) return BadUrl("must not carry user information");
  std::string port, why;
  if (!SplitAuthority(authority, &u.host, &port, &why)) return BadUrl(why);
  if (u.host.empty()) return BadUrl("has no host");
  u.port = u.scheme == "https" ? 443 : 80;
  if (!port.empty() && !ParsePort(port, &u.port)) {
    return BadUrl("port must be an integer in [1, 65535]");
  }
  if (!Listed(allowed, u.host, u.port)) {
    return BadUrl(absl::StrCat("receiver '", u.host, "' port ", u.port,
                               " is not one weftd may call; the admin allows receivers by host "
                               "and port with weftd --webhook-allow HOST:PORT (none by default)"));
  }
  return u;
}

bool IsInternalAddress(const std::string& ip) {
  in_addr v4{};
  if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) return InternalV4(ntohl(v4.s_addr));
  in6_addr v6{};
  if (inet_pton(AF_INET6, ip.c_str(), &v6) != 1) return false;
  const uint8_t* b = v6.s6_addr;
  const uint32_t embedded_v4 =
      (uint32_t{b[12]} << 24) | (uint32_t{b[13]} << 16) | (uint32_t{b[14]} << 8) | uint32_t{b[15]};
  static constexpr uint8_t kNat64[12] = {0x00, 0x64, 0xff, 0x9b};  // 64:ff9b::/96
  if (IN6_IS_ADDR_V4MAPPED(&v6) || std::memcmp(b, kNat64, sizeof kNat64) == 0) {
    return InternalV4(embedded_v4);  // the IPv4 address it carries
  }
  return IN6_IS_ADDR_UNSPECIFIED(&v6) || IN6_IS_ADDR_LOOPBACK(&v6) ||
         IN6_IS_ADDR_V4COMPAT(&v6) ||                // ::a.b.c.d, deprecated
         (b[0] & 0xFE) == 0xFC ||                    // fc00::/7: unique local
         (b[0] == 0xFE && (b[1] & 0xC0) == 0x80) ||  // fe80::/10: link-local
         (b[0] == 0xFE && (b[1] & 0xC0) == 0xC0) ||  // fec0::/10: site-local (deprecated)
         b[0] == 0xFF ||                             // ff00::/8: multicast
         (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8);  // 2001:db8::/32
}

absl::StatusOr<std::string> ResolveReceiver(const WebhookUrl& url,
                                            const std::vector<WebhookReceiver>& allowed) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(url.host.c_str(), nullptr, &hints, &found); e != 0) {
    return absl::NotFoundError(
        absl::StrCat("'", url.host, "' does not resolve: ", gai_strerror(e)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, &freeaddrinfo);
  std::vector<std::string> refused;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(
                  &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (inet_ntop(a->ai_family, raw, text, sizeof text) == nullptr) continue;
    const std::string ip = text;
    if (!IsInternalAddress(ip) || Listed(allowed, ip, url.port)) return ip;
    if (std::find(refused.begin(), refused.end(), ip) == refused.end()) refused.push_back(ip);
  }
  return absl::PermissionDeniedError(
      absl::StrCat("'", url.host, "' resolves to ", absl::StrJoin(refused, ", "),
                   ": internal addresses weftd calls only when the admin lists them with the "
                   "port (--webhook-allow ADDRESS:PORT)"));
}

}  // namespace weft
