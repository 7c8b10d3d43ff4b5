// Test helpers that run the real binaries: a weftd on a temporary data directory and a free
// port, and the weft CLI as a child process with its output captured.
#pragma once

#include <httplib.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "integration/free_port.h"

namespace weft::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `argv` (argv[0] a path) with extra NAME=value `env`, waits up to `timeout_s`.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {}, int timeout_s = 300);

// Pids of live (non-zombie) learner processes of `job_id` (only rank `rank` if >= 0), found
// through /proc/<pid>/environ: in a container the learner itself, not its engine's processes.
std::vector<int64_t> LearnerPids(const std::string& job_id, int rank = -1);

// Sends `request` as is on a new connection to 127.0.0.1:`port` and returns weftd's first answer:
// what arrives until its head and Content-Length bytes of body are in, weftd closes the
// connection, or 3 s pass.
std::string RawExchange(int port, const std::string& request);

// The job id in `weft submit`'s output ("job job-… submitted"), or "" if there is none.
std::string SubmittedJobId(const std::string& output);

// A job's history (GET /v1/jobs/ID's "history"), one reason per line.
std::string HistoryText(const nlohmann::json& job);

class WeftdProcess {
 public:
  explicit WeftdProcess(std::string data_dir);
  ~WeftdProcess();  // stops weftd (SIGTERM, then SIGKILL)

  // Extra weftd flags for the next Start() (e.g. {"--config", path}).
  void set_args(std::vector<std::string> args) { args_ = std::move(args); }
  // Serve over TLS from the next Start() with this certificate chain and key (PEM files); the
  // clients and the CLI then speak https and trust `cert`.
  void set_tls(std::string cert, std::string key) {
    tls_cert_ = std::move(cert);
    tls_key_ = std::move(key);
  }
  // The REST port of the next Start() (0, the default: a free one).
  void set_port(int port) { next_port_ = port; }
  // Extra environment ("NAME=value") for the next Start(); learners inherit it.
  void set_env(std::vector<std::string> env) { env_ = std::move(env); }
  // From the next Start() on, weftd runs with a pseudo-terminal as its controlling terminal, as
  // when an operator starts it from a shell; TerminalOutput() reads what the terminal shows.
  void set_terminal(bool on) { terminal_ = on; }
  // What weftd's terminal has shown since the last call (its output, and input echoed back).
  std::string TerminalOutput() const;
  // Whether the weftd process is still running (reaps it if it died).
  bool Alive();
  // Starts weftd and waits until /healthz answers. False on failure (see log()). On a port of
  // its own drawing that another process took first, draws another (3 tries in all).
  bool Start();
  // SIGTERM and wait; SIGKILL if it does not go within 10 s.
  void Stop();
  // kill -9, as a crash.
  void Kill();

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string server() const;  // "127.0.0.1:PORT"
  std::string url() const;     // "http://127.0.0.1:PORT", or https with TLS
  std::string log() const;     // weftd's own output

  // Runs the weft CLI against this weftd, as tenant `default` (token()).
  CommandResult Cli(const std::vector<std::string>& args, int timeout_s = 300) const;
  // Runs the weft CLI with a given token ("" for none).
  CommandResult CliAs(const std::string& token, const std::vector<std::string>& args,
                      int timeout_s = 300) const;
  // Runs the weft CLI as tenant `default` with a terminal as its standard output, as a person at
  // a shell runs it (through script(1)); the output is what the terminal was sent.
  CommandResult CliOnTerminal(const std::vector<std::string>& args, int timeout_s = 60) const;

  // The admin token weftd wrote on its first start, and a token of tenant `default` created
  // through the API on the first Start() of this object.
  std::string admin_token() const;
  const std::string& token() const { return token_; }
  // The tenant token to use instead of making one on the first Start() (a standby weftd, whose
  // API redirects until it leads, shares its leader's tenants).
  void set_token(std::string token) { token_ = std::move(token); }
  // Polls GET /v1/jobs/ID (as `as_token`, token() when "") every 200 ms until the job's state
  // is one of `states`; returns the job's JSON. After `timeout_s` adds a test failure and
  // returns the last answer.
  nlohmann::json WaitForJob(const std::string& id, const std::vector<std::string>& states,
                            int timeout_s, const std::string& as_token = "") const;
  // Polls GET /v1/jobs/ID (as `as_token`, token() when "") every 200 ms until `done(job)`
  // holds; after `timeout_s` adds a test failure naming `what` and returns the last answer.
  nlohmann::json WaitForJobWhere(const std::string& id,
                                 const std::function<bool(const nlohmann::json&)>& done,
                                 int timeout_s, const std::string& what,
                                 const std::string& as_token = "") const;
  // `weft submit PATH` as tenant `default`: the job's id ("" and a test failure if refused).
  std::string Submit(const std::string& manifest_path) const;
  // `weft logs ID --rank RANK`: learner RANK's log (a test failure if the command fails).
  std::string LearnerLog(const std::string& id, int rank) const;
  // An HTTP client carrying `token` ("" = no Authorization header); token() by default.
  httplib::Client Client() const { return ClientAs(token_); }
  httplib::Client ClientAs(const std::string& token) const;

 private:
  // One start on port_.
  bool StartOnce();

  std::string data_dir_;
  std::string token_;
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::string tls_cert_, tls_key_;
  int port_ = 0;
  int next_port_ = 0;
  pid_t pid_ = 0;
  std::string log_path_;
  bool terminal_ = false;
  int terminal_fd_ = -1;  // the pseudo-terminal's master side
};

}  // namespace weft::testing
