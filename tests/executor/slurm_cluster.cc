#include "executor/slurm_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "integration/free_port.h"

namespace weft::testing {
namespace {

bool Executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// `argv` run to its end with SLURM_CONF=`conf`, its output captured.
SlurmCluster::Output RunCaptured(const std::vector<std::string>& argv, const std::string& conf) {
  std::string line = "SLURM_CONF='" + conf + "'";
  for (const std::string& a : argv) line += " '" + a + "'";
  line += " 2>&1";
  SlurmCluster::Output out;
  FILE* p = popen(line.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.text.append(buf.data(), n);
  const int status = pclose(p);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace

std::unique_ptr<SlurmCluster> SlurmCluster::Start(int nodes, int cpus_per_node, std::string* why,
                                                  int gpus_per_node) {
  if (geteuid() != 0) {
    *why = "Slurm's daemons run as root here (SlurmUser=root) and this test is not root";
    return nullptr;
  }
  for (const char* bin : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd",
                          "/usr/sbin/mungekey", "/usr/bin/sbatch"}) {
    if (!Executable(bin)) {
      *why = std::string(bin) +
             " is not installed (scripts/install-deps.sh installs slurm-wlm "
             "and munge)";
      return nullptr;
    }
  }
  std::unique_ptr<SlurmCluster> c(new SlurmCluster());
  char tmpl[] = "/tmp/weft-slurm-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *why = "cannot create a temporary directory";
    return nullptr;
  }
  c->dir_ = tmpl;
  const std::string& d = c->dir_;
  chmod(d.c_str(), 0755);  // munged wants its socket's directory 755
  for (const char* sub : {"state", "spool", "munge"})
    std::filesystem::create_directories(d + "/" + sub);
  chmod((d + "/munge").c_str(), 0755);

  // munge: a key of its own, and munged on a socket in the directory.
  if (std::system(("/usr/sbin/mungekey --create --keyfile=" + d + "/munge/munge.key > " + d +
                   "/mungekey.log 2>&1")
                      .c_str()) != 0) {
    *why = "mungekey failed; see " + d + "/mungekey.log";
    return nullptr;
  }
  const std::string socket = d + "/munge/munge.socket.2";
  c->daemons_.push_back(
      c->Spawn({"/usr/sbin/munged", "-F", "--force", "--socket=" + socket,
                "--key-file=" + d + "/munge/munge.key", "--pid-file=" + d + "/munge/munged.pid",
                "--seed-file=" + d + "/munge/munged.seed", "--log-file=" + d + "/munged.log"},
               d + "/munged.out"));
  for (int i = 0; i < 100 && !std::filesystem::exists(socket); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!std::filesystem::exists(socket)) {
    *why = "munged did not start; see " + d + "/munged.log and munged.out";
    return nullptr;
  }

  // slurm.conf: the settings ../shared/slurm/README.md verified, every path under `d`.
  std::ostringstream conf;
  conf << "ClusterName=weft-test\nSlurmctldHost=localhost\nSlurmctldPort=" << FreePort()
       << "\nAuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << socket
       << "\nSlurmUser=root\nSlurmdUser=root\nProctrackType=proctrack/linuxproc\n"
          "TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
          "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
          "SchedulerType=sched/backfill\nMpiDefault=none\nReturnToService=2\n"
          "SlurmdTimeout=30\nInactiveLimit=0\nMinJobAge=300\nKillWait=5\nWaittime=0\n"
          "AccountingStorageType=accounting_storage/none\n"
          "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0\n"
       << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool/%n\n"
       << "SlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d << "/slurmd-%n.pid\n"
       << "SlurmctldLogFile=" << d << "/slurmctld.log\nSlurmdLogFile=" << d << "/slurmd-%n.log\n";
  std::string node_list;
  std::ostringstream gres;
  if (gpus_per_node > 0) conf << "GresTypes=gpu\n";
  for (int k = 1; k <= nodes; ++k) {
    const std::string name = "node" + std::to_string(k);
    c->nodes_.push_back(name);
    node_list += (k > 1 ? "," : "") + name;
    conf << "NodeName=" << name << " NodeHostname=localhost NodeAddr=127.0.0.1 Port=" << FreePort()
         << " CPUs=" << cpus_per_node << " RealMemory=4000 State=UNKNOWN";
    if (gpus_per_node > 0) conf << " Gres=gpu:" << gpus_per_node;
    conf << "\n";
    std::filesystem::create_directories(d + "/spool/" + name);
    for (int g = 0; g < gpus_per_node; ++g) {
      std::filesystem::create_directories(d + "/dev/" + name);
      const std::string dev = d + "/dev/" + name + "/fakegpu" + std::to_string(g);
      if (mknod(dev.c_str(), S_IFCHR | 0666, makedev(195, g)) != 0) {
        *why = "cannot make the fake GPU " + dev;
        return nullptr;
      }
      gres << "NodeName=" << name << " Name=gpu File=" << dev << "\n";
    }
  }
  if (gpus_per_node > 0) std::ofstream(d + "/gres.conf") << gres.str();
  conf << "PartitionName=debug Nodes=" << node_list << " Default=YES MaxTime=INFINITE State=UP\n";
  c->conf_ = d + "/slurm.conf";
  std::ofstream(c->conf_) << conf.str();

  c->daemons_.push_back(
      c->Spawn({"/usr/sbin/slurmctld", "-D", "-i", "-f", c->conf_}, d + "/slurmctld.out"));
  for (const std::string& name : c->nodes_) {
    c->daemons_.push_back(c->Spawn({"/usr/sbin/slurmd", "-D", "-N", name, "-f", c->conf_},
                                   d + "/slurmd-" + name + ".out"));
  }
  if (!c->WaitIdle(30)) {
    *why = "the Slurm nodes did not become idle within 30 s; see " + d +
           "/slurmctld.log and slurmd-*.log (kept)";
    c->dir_.clear();  // keep the logs
    return nullptr;
  }
  return c;
}

pid_t SlurmCluster::Spawn(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    setenv("SLURM_CONF", conf_.c_str(), 1);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

bool SlurmCluster::WaitIdle(int seconds) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    Output states = Command({"sinfo", "-h", "-N", "-o", "%T"});
    if (states.exit_code == 0) {
      std::istringstream lines(states.text);
      std::string state;
      size_t idle = 0;
      while (lines >> state) idle += state == "idle";
      if (idle == nodes_.size()) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

SlurmCluster::Output SlurmCluster::Command(const std::vector<std::string>& argv) const {
  return RunCaptured(argv, conf_);
}

std::string SlurmCluster::JobState(const std::string& id) const {
  Output out = Command({"squeue", "-h", "-j", id, "-o", "%T"});
  std::string state = out.exit_code == 0 ? out.text : "";
  while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) state.pop_back();
  return state;
}

SlurmCluster::~SlurmCluster() {
  if (!conf_.empty() && !daemons_.empty()) Command({"scancel", "--full", "-u", "root"});
  // Last started, first stopped: the slurmds, slurmctld, then munged.
  for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) kill(-*it, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (pid_t pid : daemons_) {
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace weft::testing
