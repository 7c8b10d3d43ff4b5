// The `weft` command's client of weftd's REST API (cpp-httplib): one call, a streamed GET, how
// an error reply is shown to a person, and the formatting the commands share.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/sse.h"
#include "nlohmann/json.hpp"

namespace httplib {
class Client;
}

namespace weft::cli {

using nlohmann::json;

inline constexpr char kDefaultServer[] = "http://127.0.0.1:8470";

struct Reply {
  int status = 0;  // HTTP status; 0: no answer
  std::string body;
  std::string error;        // transport error
  std::string retry_after;  // the Retry-After header of a 429, in seconds
  std::string location;     // the Location header of a redirect
  json Json() const { return json::parse(body, nullptr, false); }
};

class Client {
 public:
  // `server`: host:port or a URL (https://… for a weftd with --tls-cert), or several,
  // comma-separated (weftd in active/standby: tried in turn until one answers); `token`: the
  // bearer token (empty: none); `ca_cert`: a PEM file of the certificates an https weftd's must
  // chain to (empty: the system's trusted ones).
  Client(std::string server, std::string token, std::string ca_cert = "");
  const std::string& server() const { return server_; }

  // One request (GET, POST, PATCH or DELETE); status 0 with `error` set when no server can be
  // reached within 5 s (120 s for the answer). A 429 (the tenant's request rate) is sent again
  // after its Retry-After, up to kRateLimitedTries times in all, saying so on stderr. A 307 (a
  // standby weftd naming its leader) is followed once, with the token.
  Reply Call(const std::string& method, const std::string& path, const std::string& body = "",
             const std::string& content_type = "application/yaml") const;

  // Upload, Stream and Events go to the leader: with several servers, or a standby, the first
  // that answers GET /healthz names it.
  // POSTs the file at `file` as the body of `path`, read in pieces as it is sent (an artifact
  // upload). Status 0 with `error` set when the file cannot be read or weftd cannot be reached.
  Reply Upload(const std::string& path, const std::string& file) const;

  // Streams a GET body to `on_piece` as it arrives, piece by piece. False with `error` set on a
  // transport error or an error reply.
  bool Stream(const std::string& path, const std::function<void(std::string_view)>& on_piece,
              std::string* error) const;

  // Reads the server-sent events of a GET of `path` (an events route), calling `on_event` for
  // each as it arrives until it returns false or weftd ends the stream. Status 200 then; 0 with
  // `error` set when weftd cannot be reached or the connection broke; an error reply's status
  // and body otherwise. `on_open`, if set, is called once weftd has answered 200 and before any
  // event: what a reader reads then is as of the stream's start or later, so it misses nothing
  // the stream does not carry (false from it stops there, status 200).
  Reply Events(const std::string& path, const std::function<bool(const SseEvent&)>& on_event,
               const std::function<bool()>& on_open = nullptr) const;

  static constexpr int kRateLimitedTries = 4;

 private:
  Reply CallOnce(const std::string& method, const std::string& path, const std::string& body,
                 const std::string& content_type) const;
  // A connection to the server, with the token and the certificates to verify it by.
  std::unique_ptr<httplib::Client> Connect() const;
  std::unique_ptr<httplib::Client> Connect(const std::string& server) const;
  // For what cannot be sent twice or follow a redirect (streams, uploads): a connection to the
  // leader, as the first server that answers GET /healthz says (a standby names the leader).
  std::unique_ptr<httplib::Client> ConnectToLeader() const;
  // Sends one request to `server`.
  Reply Send(const std::string& server, const std::string& method, const std::string& path,
             const std::string& body, const std::string& content_type) const;
  std::vector<std::string> servers_;
  mutable std::string server_;  // the one that last answered
  std::string token_;
  std::string ca_cert_;
};

// Prints an error reply (the message and each field's problem); returns the exit code: 1 when
// weftd refused, 2 when it could not be reached.
int Fail(const Reply& r);

// Sends a request that changes something and prints `done` (with the job's new state, if the
// answer has one); returns the exit code.
int Act(const Client& client, const std::string& method, const std::string& path,
        const std::string& done);

// j[key] with `decimals` decimals, or "-" when absent.
std::string Num(const json& j, const char* key, int decimals);

}  // namespace weft::cli
