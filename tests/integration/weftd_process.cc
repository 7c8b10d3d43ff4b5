#include "integration/weftd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "nlohmann/json.hpp"

namespace weft::testing {

std::vector<int64_t> LearnerPids(const std::string& job_id, int rank) {
  std::vector<int64_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream env(entry.path() / "environ");
    std::string s((std::istreambuf_iterator<char>(env)), {});
    const std::string nul(1, '\0');
    if (s.find("WEFT_JOB_ID=" + job_id + nul) == std::string::npos) continue;
    if (rank >= 0 &&
        (nul + s).find(nul + "RANK=" + std::to_string(rank) + nul) == std::string::npos) {
      continue;
    }
    std::ifstream stat(entry.path() / "stat");
    std::string st((std::istreambuf_iterator<char>(stat)), {});
    auto paren = st.rfind(')');
    if (paren != std::string::npos && paren + 2 < st.size() && st[paren + 2] == 'Z') continue;
    // The container engine's processes carry the learner's environment too (podman passes it
    // on; catatonit, as podman-init, is the container's init): not learners.
    const std::string comm = st.substr(st.find('(') + 1, paren - st.find('(') - 1);
    if (comm == "podman" || comm == "conmon" || comm == "podman-init") continue;
    pids.push_back(std::stoll(entry.path().filename().string()));
  }
  return pids;
}

namespace {

// `terminal`: the path of a pseudo-terminal that becomes the process's controlling terminal (in
// a session of its own, as a shell would start it), and its standard input.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int out_fd,
            const std::string& terminal = "") {
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    int in = -1;
    if (!terminal.empty()) {
      setsid();
      in = open(terminal.c_str(), O_RDWR);  // a session leader's first terminal: its own
    }
    if (in < 0) in = open("/dev/null", O_RDONLY);
    dup2(in, STDIN_FILENO);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         int timeout_s) {
  char tmpl[] = "/tmp/weft-cmd-XXXXXX";
  int fd = mkstemp(tmpl);
  pid_t pid = Spawn(argv, env, fd);
  CommandResult r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (true) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.output = "(timed out)\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  close(fd);
  std::ifstream in(tmpl);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output += ss.str();
  unlink(tmpl);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

WeftdProcess::WeftdProcess(std::string data_dir) : data_dir_(std::move(data_dir)) {
  log_path_ = data_dir_ + ".weftd.log";
}

WeftdProcess::~WeftdProcess() {
  Stop();
  if (terminal_fd_ >= 0) close(terminal_fd_);
}

std::string WeftdProcess::TerminalOutput() const {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{terminal_fd_, POLLIN, 0};
    if (terminal_fd_ < 0 || poll(&p, 1, 100) <= 0) break;
    const ssize_t n = read(terminal_fd_, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string WeftdProcess::server() const { return "127.0.0.1:" + std::to_string(port_); }

std::string WeftdProcess::url() const {
  return (tls_cert_.empty() ? "http://" : "https://") + server();
}

bool WeftdProcess::Start() {
  const bool pinned = next_port_ > 0;
  for (int attempt = 0;; ++attempt) {
    const size_t log_before = log().size();
    port_ = pinned ? next_port_ : FreePort();
    if (StartOnce()) break;
    // Another process took the port between FreePort() and weftd's bind: draw another one
    // (a pinned port, a restart's, is the test's to keep).
    const bool port_lost =
        log().find("cannot listen on " + server(), log_before) != std::string::npos;
    if (pinned || !port_lost || attempt == 2) {
      next_port_ = 0;
      return false;
    }
  }
  next_port_ = 0;
  return true;
}

bool WeftdProcess::StartOnce() {
  int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<std::string> argv = {std::string(WEFT_BIN_DIR) + "/weftd", "--data-dir", data_dir_,
                                   "--listen", server()};
  if (!tls_cert_.empty()) argv.insert(argv.end(), {"--tls-cert", tls_cert_, "--tls-key", tls_key_});
  // WEFT_TEST_RUNTIME=none: the suite's learners unconfined (a sanitizer run, whose reports a
  // container would keep from the host).
  if (const char* runtime = getenv("WEFT_TEST_RUNTIME"); runtime != nullptr && *runtime != '\0') {
    argv.insert(argv.end(), {"--runtime", runtime});
  }
  // Jobs' uids of their own: tests running side by side must not give two jobs one uid (under
  // bubblewrap a uid's processes count against one RLIMIT_NPROC); every weftd of this test
  // process (a restart, a standby) keeps the same range.
  if (std::find(args_.begin(), args_.end(), "--first-job-uid") == args_.end()) {
    argv.insert(argv.end(),
                {"--first-job-uid", std::to_string(1000000000LL + (getpid() % 10000) * 65536LL)});
  }
  argv.insert(argv.end(), args_.begin(), args_.end());
  std::string terminal;
  if (terminal_ && terminal_fd_ < 0) {
    terminal_fd_ = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (terminal_fd_ < 0 || grantpt(terminal_fd_) != 0 || unlockpt(terminal_fd_) != 0) {
      return false;
    }
  }
  if (terminal_fd_ >= 0) terminal = ptsname(terminal_fd_);
  pid_ = Spawn(argv, env_, fd, terminal);
  close(fd);
  httplib::Client c = ClientAs("");
  c.set_connection_timeout(1, 0);
  for (int i = 0; i < 200; ++i) {
    auto r = c.Get("/healthz");
    if (r && r->status == 200) {
      if (token_.empty()) {
        auto t = ClientAs(admin_token()).Post("/v1/tenants/default/tokens", "", "application/json");
        if (!t || t->status != 201) return false;
        token_ = nlohmann::json::parse(t->body)["token"];
      }
      return true;
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

bool WeftdProcess::Alive() {
  if (pid_ <= 0) return false;
  int status;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = 0;
    return false;
  }
  return true;
}

void WeftdProcess::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Kill();
}

void WeftdProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status;
  waitpid(pid_, &status, 0);
  pid_ = 0;
}

std::string WeftdProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult WeftdProcess::Cli(const std::vector<std::string>& args, int timeout_s) const {
  return CliAs(token_, args, timeout_s);
}

CommandResult WeftdProcess::CliAs(const std::string& token, const std::vector<std::string>& args,
                                  int timeout_s) const {
  std::vector<std::string> argv = {std::string(WEFT_BIN_DIR) + "/weft", "--server", url(),
                                   "--token", token};
  if (!tls_cert_.empty()) argv.insert(argv.end(), {"--ca-cert", tls_cert_});
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, {}, timeout_s);
}

CommandResult WeftdProcess::CliOnTerminal(const std::vector<std::string>& args,
                                          int timeout_s) const {
  std::vector<std::string> argv = {std::string(WEFT_BIN_DIR) + "/weft", "--server", url(),
                                   "--token", token_};
  if (!tls_cert_.empty()) argv.insert(argv.end(), {"--ca-cert", tls_cert_});
  argv.insert(argv.end(), args.begin(), args.end());
  std::string shell;
  for (const std::string& a : argv) {
    std::string quoted = "'";
    for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    shell += (shell.empty() ? "" : " ") + quoted + "'";
  }
  return RunCommand({"/usr/bin/script", "--quiet", "--return", "--command", shell, "/dev/null"}, {},
                    timeout_s);
}

std::string WeftdProcess::admin_token() const {
  std::ifstream in(data_dir_ + "/admin.token");
  std::string t;
  std::getline(in, t);
  return t;
}

httplib::Client WeftdProcess::ClientAs(const std::string& token) const {
  httplib::Client c(url());
  if (!tls_cert_.empty()) c.set_ca_cert_path(tls_cert_.c_str());
  if (!token.empty()) c.set_bearer_token_auth(token);
  return c;
}

std::string RawExchange(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  timeval timeout{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) {
    answer.append(buf, static_cast<size_t>(n));
    const size_t head = answer.find("\r\n\r\n");
    const size_t length = answer.find("Content-Length: ");
    if (head == std::string::npos || length == std::string::npos || length > head) continue;
    if (answer.size() >= head + 4 + std::stoul(answer.substr(length + 16))) break;
  }
  close(fd);
  return answer;
}

std::string SubmittedJobId(const std::string& output) {
  std::smatch m;
  static const std::regex re("job (job-[0-9a-z]+-[0-9a-z]+) submitted");
  return std::regex_search(output, m, re) ? m[1].str() : "";
}

nlohmann::json WeftdProcess::WaitForJobWhere(const std::string& id,
                                             const std::function<bool(const nlohmann::json&)>& done,
                                             int timeout_s, const std::string& what,
                                             const std::string& as_token) const {
  nlohmann::json j;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (true) {
    auto r = ClientAs(as_token.empty() ? token_ : as_token).Get("/v1/jobs/" + id);
    if (r && r->status == 200) {
      j = nlohmann::json::parse(r->body, nullptr, false);
      if (j.is_object() && done(j)) return j;
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ADD_FAILURE() << "job " << id << ": " << what << " never happened: " << j.dump(2);
  return j;
}

nlohmann::json WeftdProcess::WaitForJob(const std::string& id,
                                        const std::vector<std::string>& states, int timeout_s,
                                        const std::string& as_token) const {
  std::string wanted;
  for (const std::string& s : states) wanted += (wanted.empty() ? "" : " or ") + s;
  return WaitForJobWhere(
      id,
      [&states](const nlohmann::json& j) {
        return std::find(states.begin(), states.end(), j.value("state", "")) != states.end();
      },
      timeout_s, "state " + wanted, as_token);
}

std::string WeftdProcess::Submit(const std::string& manifest_path) const {
  CommandResult r = Cli({"submit", manifest_path});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return SubmittedJobId(r.output);
}

std::string WeftdProcess::LearnerLog(const std::string& id, int rank) const {
  CommandResult r = Cli({"logs", id, "--rank", std::to_string(rank)});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

std::string HistoryText(const nlohmann::json& job) {
  std::string text;
  for (const auto& e : job["history"]) text += e.value("reason", "") + "\n";
  return text;
}

}  // namespace weft::testing
