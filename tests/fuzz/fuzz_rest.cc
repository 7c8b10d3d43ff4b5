// libFuzzer target: weftd's whole REST API — HTTP parsing (cpp-httplib), authentication,
// routing and every handler — on requests read from memory, against the World's store and
// controller. The input picks a token, a method and a path ("@J" stands for the World's job)
// and the rest is the body:
//   byte 0: token (0 none, 1 admin, 2 tenant acme, 3 tenant globex, else garbage)
//   byte 1: method (GET, POST, PUT, PATCH, DELETE)
//   then the path up to the first newline, then the body.
// Every answer must be a status under 500 with a JSON error body {"error": {"code",
// "message"}} for 4xx, each detail naming a field; a crash, a sanitizer report or a hang fails.
#include <httplib.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/strings/str_replace.h"
#include "api/routes.h"
#include "fuzz/fuzz_world.h"
#include "nlohmann/json.hpp"

namespace weft::fuzz {
namespace {

// A connection that delivers `in` and collects what the server writes.
class MemoryStream : public httplib::Stream {
 public:
  explicit MemoryStream(std::string in) : in_(std::move(in)) {}
  bool is_readable() const override { return true; }
  // Until a streamed answer's head is out: a stream (a followed log, an event stream) writes for
  // as long as its client listens, and this one would listen forever.
  bool is_writable() const override {
    const size_t head = out_.find("\r\n\r\n");
    return head == std::string::npos ||
           out_.substr(0, head).find("Transfer-Encoding: chunked") == std::string::npos;
  }
  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, in_.size() - pos_);
    in_.copy(ptr, n, pos_);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8470;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  const std::string& out() const { return out_; }

 private:
  std::string in_;
  size_t pos_ = 0;
  std::string out_;
};

// The API on a server whose connections are MemoryStreams.
class MemoryServer : public httplib::Server {
 public:
  MemoryServer()
      : services_{*World::Get().controller,
                  jobs_,
                  tenancy_,
                  datasets_,
                  World::Get().executor,
                  SystemClock::Get(),
                  World::Get().dir + "/admin.token",
                  nullptr,
                  World::Get().artifacts.get(),
                  &webhooks_} {
    api::RestOptions options;
    options.max_request_bytes = 64 << 10;
    api::InstallApi(*this, services_, nullptr, options);
  }
  // One request on its own connection; the raw answer.
  std::string Exchange(const std::string& request) {
    MemoryStream stream(request);
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, [](httplib::Request&) {});
    return stream.out();
  }

 private:
  // control/'s services over the world's store, as RestServer makes them.
  JobQueries jobs_{*World::Get().store};
  Tenancy tenancy_{*World::Get().store, SystemClock::Get()};
  Datasets datasets_{*World::Get().store, SystemClock::Get()};
  // The seed's receiver allowed, so registrations get past the URL check.
  Webhooks webhooks_{*World::Get().store, SystemClock::Get(), [] {
                       WebhookOptions o;
                       o.allowed = {{"127.0.0.1", 9000}};
                       return o;
                     }()};
  api::Services services_;
};

[[noreturn]] void Fail(const std::string& why, const std::string& request,
                       const std::string& answer) {
  std::cerr << "fuzz_rest: " << why << "\n--- request\n"
            << request << "\n--- answer\n"
            << answer << "\n";
  std::abort();
}

void CheckAnswer(const std::string& request, const std::string& answer) {
  if (answer.rfind("HTTP/1.1 ", 0) != 0) return;  // httplib refused to parse it: no answer
  const int status = std::atoi(answer.c_str() + 9);
  if (status >= 500) Fail("a 5xx", request, answer);
  if (status < 400) return;
  const size_t body_at = answer.find("\r\n\r\n");
  if (body_at == std::string::npos) Fail("no body", request, answer);
  auto body = nlohmann::json::parse(answer.substr(body_at + 4), nullptr, false);
  if (!body.is_object() || !body.contains("error") || !body["error"].contains("code") ||
      !body["error"]["message"].is_string()) {
    Fail("an error without the API's error body", request, answer);
  }
  for (const auto& d : body["error"].value("details", nlohmann::json::array())) {
    if (!d.contains("field") || d["field"].get<std::string>().empty()) {
      Fail("a problem that names no field", request, answer);
    }
  }
}

}  // namespace
}  // namespace weft::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using weft::fuzz::World;
  static auto* server = new weft::fuzz::MemoryServer();
  if (size < 2) return 0;
  World& w = World::Get();
  const std::string tokens[] = {"", w.admin_token, w.acme_token, w.globex_token};
  const char* methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
  std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t nl = rest.find('\n');
  std::string path = rest.substr(0, nl);
  std::string body = nl == std::string::npos ? "" : rest.substr(nl + 1);
  path = absl::StrReplaceAll(path, {{"@J", w.job_id}});
  if (path.empty() || path[0] != '/') path = "/" + path;
  std::string request = std::string(methods[data[1] % 5]) + " " + path + " HTTP/1.1\r\n" +
                        "Host: weft\r\nContent-Type: application/yaml\r\n";
  if (data[0] < 4 && data[0] > 0) request += "Authorization: Bearer " + tokens[data[0]] + "\r\n";
  if (data[0] >= 4) request += "Authorization: Bearer " + std::string(data[0] % 7, 'x') + "\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  weft::fuzz::CheckAnswer(request, server->Exchange(request));
  // The fake executor remembers every launch and stop; forget them.
  w.executor.launches.clear();
  w.executor.stopped.clear();
  return 0;
}
