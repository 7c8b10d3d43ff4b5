#include "cli/client.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace weft::cli {

namespace {

// An answer as a Reply; status 0 with `error` set when there is none.
Reply ToReply(const httplib::Result& r, const std::string& server) {
  Reply out;
  if (!r) {
    const httplib::Error e = r.error();
    const bool tls = e == httplib::Error::SSLConnection || e == httplib::Error::SSLLoadingCerts ||
                     e == httplib::Error::SSLServerVerification;
    out.error = absl::StrCat(
        "cannot reach weftd at ", server, ": ", httplib::to_string(e),
        tls ? " (is its certificate one you trust? a self-signed weftd's: --ca-cert or "
              "WEFT_CA_CERT)"
            : " (is weftd running? set --server or WEFT_SERVER)");
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  out.retry_after = r->get_header_value("Retry-After");
  return out;
}

}  // namespace

Client::Client(std::string server, std::string token, std::string ca_cert)
    : token_(std::move(token)), ca_cert_(std::move(ca_cert)) {
  for (absl::string_view part : absl::StrSplit(server, ',', absl::SkipWhitespace())) {
    std::string s(absl::StripAsciiWhitespace(part));
    if (s.find("://") == std::string::npos) s = "http://" + s;
    servers_.push_back(std::move(s));
  }
  if (servers_.empty()) servers_.push_back(kDefaultServer);
  server_ = servers_.front();
}

std::unique_ptr<httplib::Client> Client::Connect() const { return Connect(server_); }

std::unique_ptr<httplib::Client> Client::ConnectToLeader() const {
  Reply r = CallOnce("GET", "/healthz", "", "");
  json j = r.Json();
  if (r.status == 200 && j.is_object() && j.value("status", "") == "standby" &&
      j.contains("leader") && j["leader"].is_string() && !j["leader"].get<std::string>().empty()) {
    server_ = j["leader"].get<std::string>();
  }
  return Connect();
}

std::unique_ptr<httplib::Client> Client::Connect(const std::string& server) const {
  auto c = std::make_unique<httplib::Client>(server);
  if (!ca_cert_.empty()) c->set_ca_cert_path(ca_cert_.c_str());
  if (!token_.empty()) c->set_bearer_token_auth(token_);
  c->set_connection_timeout(5, 0);
  c->set_read_timeout(120, 0);
  return c;
}

Reply Client::Call(const std::string& method, const std::string& path, const std::string& body,
                   const std::string& content_type) const {
  // A 429 is answered before the request does anything, so any method may be sent again.
  for (int attempt = 1;; ++attempt) {
    Reply r = CallOnce(method, path, body, content_type);
    if (r.status != 429 || attempt == kRateLimitedTries) return r;
    int seconds = 1;
    if (!absl::SimpleAtoi(r.retry_after, &seconds)) seconds = 1;
    seconds = std::clamp(seconds, 1, 30);
    std::cerr << "weft: over the tenant's request rate; retrying in " << seconds << " s\n";
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
  }
}

Reply Client::Send(const std::string& server, const std::string& method, const std::string& path,
                   const std::string& body, const std::string& content_type) const {
  std::unique_ptr<httplib::Client> c = Connect(server);
  httplib::Result r{nullptr, httplib::Error::Unknown};
  if (method == "GET") r = c->Get(path);
  if (method == "POST") r = c->Post(path, body, content_type);
  if (method == "PATCH") r = c->Patch(path, body, content_type);
  if (method == "DELETE") r = c->Delete(path);
  Reply reply = ToReply(r, server);
  if (r) reply.location = r->get_header_value("Location");
  return reply;
}

Reply Client::CallOnce(const std::string& method, const std::string& path, const std::string& body,
                       const std::string& content_type) const {
  // The server that answered last first, then the others in order.
  std::vector<std::string> order = {server_};
  for (const std::string& s : servers_) {
    if (s != server_) order.push_back(s);
  }
  Reply r;
  for (const std::string& server : order) {
    r = Send(server, method, path, body, content_type);
    if (r.status != 0) {
      server_ = server;
      break;
    }
  }
  // A standby names the leader: scheme://host:port followed by the same path.
  const size_t scheme = r.location.find("://");
  const size_t slash = scheme == std::string::npos ? scheme : r.location.find('/', scheme + 3);
  if (r.status == 307 && slash != std::string::npos) {
    const std::string leader = r.location.substr(0, slash);
    Reply followed = Send(leader, method, r.location.substr(slash), body, content_type);
    if (followed.status != 0) server_ = leader;
    return followed;
  }
  return r;
}

Reply Client::Events(const std::string& path, const std::function<bool(const SseEvent&)>& on_event,
                     const std::function<bool()>& on_open) const {
  std::unique_ptr<httplib::Client> c = ConnectToLeader();
  c->set_read_timeout(60, 0);  // weftd writes a keep-alive every 15 s
  Reply out;
  SseParser parser;
  bool stopped = false;  // on_event asked to stop
  auto on_response = [&](const httplib::Response& resp) {
    out.status = resp.status;
    if (resp.status == 200 && on_open && !on_open()) stopped = true;
    return !stopped;
  };
  auto on_data = [&](const char* data, size_t n) {
    if (out.status != 200) {
      if (out.body.size() < (1 << 20)) out.body.append(data, n);
      return true;
    }
    bool ok = parser.Feed(std::string_view(data, n), [&](const SseEvent& e) {
      if (!stopped && !on_event(e)) stopped = true;
    });
    if (!ok) out.error = "weftd sent an event stream line over 8 MiB";
    return ok && !stopped;
  };
  httplib::Result r = c->Get(path, on_response, on_data);
  if (!r && !stopped) {
    out.status = 0;
    if (out.error.empty()) {
      out.error = absl::StrCat("lost the event stream from weftd at ", server_, ": ",
                               httplib::to_string(r.error()));
    }
  }
  return out;
}

Reply Client::Upload(const std::string& path, const std::string& file) const {
  Reply out;
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) {
    out.error = absl::StrCat("cannot read ", file);
    return out;
  }
  const auto size = static_cast<size_t>(in.tellg());
  in.seekg(0);
  std::unique_ptr<httplib::Client> c = ConnectToLeader();
  c->set_write_timeout(120, 0);
  bool read_failed = false;
  auto provide = [&](size_t offset, size_t length, httplib::DataSink& sink) {
    char buf[64 * 1024];
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(buf, static_cast<std::streamsize>(std::min(length, sizeof(buf))));
    if (in.gcount() <= 0) {
      read_failed = true;
      return false;
    }
    sink.write(buf, static_cast<size_t>(in.gcount()));
    return true;
  };
  httplib::Result r = c->Post(path, size, provide, "application/octet-stream");
  out = ToReply(r, server_);
  if (read_failed) out.error = absl::StrCat("cannot read ", file, " while sending it");
  return out;
}

bool Client::Stream(const std::string& path, const std::function<void(std::string_view)>& on_piece,
                    std::string* error) const {
  std::unique_ptr<httplib::Client> c = ConnectToLeader();
  c->set_read_timeout(24 * 3600, 0);
  int status = 0;
  std::string err_body;
  auto on_response = [&](const httplib::Response& resp) {
    status = resp.status;
    return true;
  };
  auto on_data = [&](const char* data, size_t n) {
    if (status == 200) {
      on_piece(std::string_view(data, n));
    } else {
      err_body.append(data, n);
    }
    return true;
  };
  auto r = c->Get(path, on_response, on_data);
  if (!r) {
    *error = absl::StrCat("cannot reach weftd at ", server_, ": ", httplib::to_string(r.error()));
    return false;
  }
  if (status != 200) {
    json j = json::parse(err_body, nullptr, false);
    *error =
        j.is_object() && j.contains("error") ? j["error"].value("message", err_body) : err_body;
    return false;
  }
  return true;
}

int Fail(const Reply& r) {
  if (r.status == 0) {
    std::cerr << "error: " << r.error << "\n";
    return 2;
  }
  json j = r.Json();
  if (j.is_object() && j.contains("error")) {
    std::cerr << "error: " << j["error"].value("message", "") << "\n";
    if (j["error"].contains("details")) {
      for (const auto& d : j["error"]["details"]) {
        std::cerr << "  " << d.value("field", "") << ": " << d.value("problem", "") << "\n";
      }
    }
  } else {
    std::cerr << "error: HTTP " << r.status << ": " << r.body << "\n";
  }
  return 1;
}

int Act(const Client& client, const std::string& method, const std::string& path,
        const std::string& done) {
  Reply r = client.Call(method, path);
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  std::cout << done;
  if (j.contains("state")) std::cout << " (" << j.value("state", "") << ")";
  std::cout << "\n";
  return 0;
}

std::string Num(const json& j, const char* key, int decimals) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "-";
  return absl::StrFormat("%.*f", decimals, j[key].get<double>());
}

}  // namespace weft::cli
