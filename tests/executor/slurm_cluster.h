// A real, throwaway Slurm cluster on this host for tests: munged, slurmctld and one slurmd per
// logical node (node1, node2, …; each `slurmd -N nodeK` on its own loopback port), every key,
// socket, state, spool, pid and log file under one temporary directory, on free ports. The
// settings are the ones verified in ../shared/slurm/README.md. Slurm's daemons run as root here
// (SlurmUser=root), so the cluster starts only for root; otherwise Start says why.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace weft::testing {

class SlurmCluster {
 public:
  // Starts the cluster and waits (up to 30 s) until every node is idle; nullptr with the
  // reason in *why if it cannot (not root, Slurm or munge not installed, a daemon that does not
  // come up — its log is named). With `gpus_per_node`, each node has that many GPUs in its gres
  // (gres.conf File= fake device nodes of the NVIDIA major under dir()/dev, made here).
  static std::unique_ptr<SlurmCluster> Start(int nodes, int cpus_per_node, std::string* why,
                                             int gpus_per_node = 0);
  // Cancels every job, stops the daemons (SIGTERM, then SIGKILL) and removes the directory.
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // The slurm.conf Slurm's commands (sbatch, squeue, scancel, sinfo, scontrol) must read: give
  // it to them as SLURM_CONF=conf().
  const std::string& conf() const { return conf_; }
  const std::string& dir() const { return dir_; }
  // Node names, node1 … nodeN.
  const std::vector<std::string>& nodes() const { return nodes_; }

  struct Output {
    int exit_code = -1;
    std::string text;  // stdout and stderr
  };
  // Runs a Slurm command (argv[0] found on PATH) against this cluster.
  Output Command(const std::vector<std::string>& argv) const;
  // The state squeue reports for job `id` ("PENDING", "RUNNING", …), "" once Slurm has
  // forgotten it.
  std::string JobState(const std::string& id) const;

 private:
  SlurmCluster() = default;
  // Forks and execs `argv` with stdout and stderr to `log`; the child's pid.
  pid_t Spawn(const std::vector<std::string>& argv, const std::string& log);
  bool WaitIdle(int seconds) const;

  std::string dir_;
  std::string conf_;
  std::vector<std::string> nodes_;
  std::vector<pid_t> daemons_;  // munged, slurmctld, the slurmds
};

}  // namespace weft::testing
