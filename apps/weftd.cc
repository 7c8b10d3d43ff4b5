// weftd: the weft control-plane daemon (REST API, store, scheduler, executor, coordinator).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/auth.h"
#include "api/rest_server.h"
#include "common/env.h"
#include "common/files.h"
#include "common/ids.h"
#include "control/controller.h"
#include "control/coordinator_service.h"
#include "executor/local_executor.h"
#include "scheduler/fair_share_policy.h"
#include "common/logging.h"
#include "store/sqlite_store.h"
#include "yaml-cpp/yaml.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// This host as one node: all its cores and its physical memory.
weft::scheduler::Node ThisHost() {
  weft::scheduler::Node n;
  n.name = "local";
  n.capacity.cpus = std::max(1u, std::thread::hardware_concurrency());
  n.capacity.memory_mb = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) /
                         (1024 * 1024);
  n.capacity.gpus = 0;
  return n;
}

// Reads `nodes: [{name, cpus, memory_mb, gpus, cpuset}]` from a YAML config file; `cpuset` (a
// list of CPU ids) pins that node's learners to those CPUs.
absl::StatusOr<std::vector<weft::scheduler::Node>> ReadNodes(
    const std::string& path, std::map<std::string, std::vector<int>>* cpusets) {
  std::vector<weft::scheduler::Node> nodes;
  try {
    YAML::Node cfg = YAML::LoadFile(path);
    if (!cfg["nodes"] || !cfg["nodes"].IsSequence() || cfg["nodes"].size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": nodes: must be a non-empty list"));
    }
    for (size_t i = 0; i < cfg["nodes"].size(); ++i) {
      YAML::Node y = cfg["nodes"][i];
      weft::scheduler::Node n;
      n.name = y["name"].as<std::string>(absl::StrCat("node-", i));
      n.capacity.cpus = y["cpus"].as<double>();
      n.capacity.memory_mb = y["memory_mb"].as<int64_t>();
      n.capacity.gpus = y["gpus"].as<int>(0);
      if (n.capacity.cpus <= 0 || n.capacity.memory_mb <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": nodes[", i, "]: cpus and memory_mb must be positive"));
      }
      if (y["cpuset"]) {
        std::vector<int> cpus = y["cpuset"].as<std::vector<int>>();
        for (int c : cpus) {
          if (c < 0 || c >= CPU_SETSIZE) {
            return absl::InvalidArgumentError(
                absl::StrCat(path, ": nodes[", i, "].cpuset: CPU ids must be in [0, ", CPU_SETSIZE, ")"));
          }
        }
        (*cpusets)[n.name] = cpus;
      }
      nodes.push_back(n);
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what(),
                                                   " (expected nodes: [{name, cpus, memory_mb, gpus}])"));
  }
  return nodes;
}

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  return std::filesystem::path(buf).parent_path().string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weftd: the weft training service daemon"};
  std::string data_dir = "./weft-data";
  std::string listen = "127.0.0.1:8470";
  std::string coordinator_listen = "127.0.0.1:0";
  std::string config;
  std::string learner = SelfDir() + "/weft-learner";
  app.add_option("--data-dir", data_dir, "directory for the store, jobs, logs and models")
      ->capture_default_str();
  app.add_option("--listen", listen, "REST API address host:port")->capture_default_str();
  app.add_option("--coordinator-listen", coordinator_listen,
                 "gRPC address for learners (port 0 picks a free one)")
      ->capture_default_str();
  app.add_option("--config", config, "YAML file listing the cluster's nodes (default: this host)");
  app.add_option("--learner", learner, "path of the weft-learner binary")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ weftd: %v");

  auto colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port)) {
    std::cerr << "error: --listen must be host:port, got '" << listen << "'\n";
    return 2;
  }
  std::string host = listen.substr(0, colon);
  if (access(learner.c_str(), X_OK) != 0) {
    std::cerr << "error: learner binary " << learner << " is not executable (use --learner)\n";
    return 2;
  }

  std::vector<weft::scheduler::Node> nodes = {ThisHost()};
  std::map<std::string, std::vector<int>> cpusets;
  if (!config.empty()) {
    auto n = ReadNodes(config, &cpusets);
    if (!n.ok()) {
      std::cerr << "error: " << n.status().message() << "\n";
      return 2;
    }
    nodes = *n;
  }

  // Every file weftd writes that matters goes through one Env (common/env.h).
  weft::Env& env = weft::Env::Default();
  if (auto s = env.MakeDirs(data_dir + "/jobs"); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  data_dir = std::filesystem::canonical(data_dir).string();
  // One weftd per data directory.
  int lock_fd = open((data_dir + "/weftd.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    std::cerr << "error: another weftd is using " << data_dir << "\n";
    return 1;
  }

  auto store = weft::SqliteStore::Open(data_dir + "/weft.db");
  if (!store.ok()) {
    std::cerr << "error: " << store.status().message() << "\n";
    return 1;
  }
  weft::LocalExecutor executor(learner);
  // Tenancy: the `default` tenant, and the admin token on first start (printed once).
  const weft::TimeMs now = weft::SystemClock::Get().NowMs();
  if (auto s = weft::api::EnsureDefaultTenant(**store, now); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  auto admin = weft::api::EnsureAdminToken(**store, data_dir, now, env);
  if (!admin.ok()) {
    std::cerr << "error: " << admin.status().message() << "\n";
    return 1;
  }
  if (admin->has_value()) {
    std::cout << "weftd: admin token (shown once; also in " << data_dir
              << "/admin.token, mode 0600):\n  " << **admin << "\n"
              << std::flush;
  }
  weft::scheduler::FairSharePolicy policy;
  // The secret behind learners' per-job credentials (HMAC of the job id), kept across restarts so
  // adopted learners keep authenticating.
  const std::string key_file = data_dir + "/learner.key";
  auto learner_key = env.ReadFile(key_file);
  if (!learner_key.ok()) {
    std::string fresh = weft::NewSecretToken();
    if (auto s = weft::WriteFileAtomic(env, key_file, fresh, 0600); !s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return 1;
    }
    learner_key = fresh;
  }
  weft::ControllerOptions options;
  options.data_dir = data_dir;
  options.learner_key = *learner_key;
  options.nodes = nodes;
  options.node_cpusets = cpusets;
  weft::Controller controller(**store, executor, policy, weft::SystemClock::Get(), options, env);
  weft::CoordinatorService service(controller, controller.credentials(),
                                   static_cast<int>(options.heartbeat_interval_ms));
  // Learners that outlive a weftd keep dialling the coordinator's address: reuse the address of
  // the previous weftd on this data directory when no fixed port was asked for.
  const std::string addr_file = data_dir + "/coordinator.addr";
  absl::StatusOr<std::unique_ptr<weft::GrpcServer>> grpc_server =
      absl::UnavailableError("not started");
  auto previous = env.ReadFile(addr_file);
  if (previous.ok() && absl::EndsWith(coordinator_listen, ":0") && !previous->empty()) {
    grpc_server = weft::GrpcServer::Start(std::string(absl::StripAsciiWhitespace(*previous)),
                                          &service);
    if (!grpc_server.ok()) {
      spdlog::warn("previous coordinator address {} is taken; learners still running from the "
                   "previous weftd cannot reconnect and their jobs will be requeued",
                   *previous);
    }
  }
  if (!grpc_server.ok()) grpc_server = weft::GrpcServer::Start(coordinator_listen, &service);
  if (grpc_server.ok()) {
    if (auto s = weft::WriteFileAtomic(env, addr_file, (*grpc_server)->address()); !s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return 1;
    }
  }
  if (!grpc_server.ok()) {
    std::cerr << "error: " << grpc_server.status().message() << "\n";
    return 1;
  }
  controller.SetCoordinatorAddress((*grpc_server)->address());
  if (auto s = controller.Recover(); !s.ok()) {
    std::cerr << "error: recovery failed: " << s.message() << "\n";
    return 1;
  }
  weft::api::RestServer rest(**store, controller);
  if (auto s = rest.Start(host, port); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  controller.StartLoop();

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  double cpus = 0;
  for (const auto& n : nodes) cpus += n.capacity.cpus;
  spdlog::info("listening on http://{}:{} (data dir {}, {} node(s), {} cpus, learners report to {})",
               host, port, data_dir, nodes.size(), cpus, (*grpc_server)->address());
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  spdlog::info("shutting down");
  rest.Stop();
  controller.StopLoop();
  (*grpc_server)->Shutdown();
  return 0;
}
