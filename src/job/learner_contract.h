// The learner's contract: what weftd (through an executor) hands a learner process and what the
// process hands back. One home for what the two sides must agree on: the environment's names
// (FfDL's DATA_DIR, RESULT_DIR, ... and torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
// ARCHITECTURE.md), and the exit codes. Where a job's files live is in job/layout.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace weft {

// The environment variables of the contract.
namespace learner_env {
inline constexpr char kJobId[] = "WEFT_JOB_ID";
inline constexpr char kAttempt[] = "WEFT_ATTEMPT";
inline constexpr char kCredential[] = "WEFT_JOB_CREDENTIAL";
inline constexpr char kPsCredential[] = "WEFT_PS_CREDENTIAL";
// A scale-out parameter-server job's shard certificate (PEM) when weftd has TLS: its learners
// pin it and weft-ps presents it; kPsTlsKey, its private key, is given to weft-ps only. Unset:
// the shards speak plain text.
inline constexpr char kPsTlsCert[] = "WEFT_PS_TLS_CERT";
inline constexpr char kPsTlsKey[] = "WEFT_PS_TLS_KEY";
inline constexpr char kSpec[] = "WEFT_JOB_SPEC";
inline constexpr char kCoordinator[] = "WEFT_COORDINATOR";
// PEM certificates the learner verifies the coordinator by (weftd --tls-cert, or --tls-ca);
// unset or empty: the coordinator speaks plain text.
inline constexpr char kCoordinatorCa[] = "WEFT_COORDINATOR_CA";
inline constexpr char kNode[] = "WEFT_NODE";
inline constexpr char kDataDir[] = "DATA_DIR";
inline constexpr char kDataFormat[] = "WEFT_DATA_FORMAT";  // idx, csv or tensors
inline constexpr char kResultDir[] = "RESULT_DIR";
inline constexpr char kCheckpointDir[] = "CHECKPOINT_DIR";
inline constexpr char kLogDir[] = "LOG_DIR";
inline constexpr char kModelDir[] = "MODEL_DIR";    // FfDL's: the tenant's model definition
inline constexpr char kLearnerId[] = "LEARNER_ID";  // FfDL: 1-based
inline constexpr char kNumLearners[] = "NUM_LEARNERS";
inline constexpr char kRank[] = "RANK";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
inline constexpr char kWorldSize[] = "WORLD_SIZE";
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";
inline constexpr char kThreads[] = "OMP_NUM_THREADS";
// A learner that joins a running elastic job (issue 14): the generation it joins and its rank
// there (RANK stays its id, kept for life). Unset for a learner started with its attempt.
inline constexpr char kGeneration[] = "WEFT_GENERATION";
inline constexpr char kGenerationRank[] = "WEFT_GENERATION_RANK";
// A gang placed on one host that trains as one learner (JobSpec::LearnersAsOne): its size, set
// for every learner of the gang. Rank 0 trains for all of them (JobSpec::AsOneLearner); the
// others stand by. Unset for every other learner.
inline constexpr char kLearnersAsOne[] = "WEFT_LEARNERS_AS_ONE";
// Command jobs (train/command_job.h): the learner's working directory, where the code is
// unpacked and the program runs; the directory the sandbox hides (weftd's data directory);
// "required" or "optional": whether a command that cannot be sandboxed may run without.
inline constexpr char kWorkDir[] = "WORK_DIR";
inline constexpr char kPrivateDir[] = "WEFT_PRIVATE_DIR";
inline constexpr char kSandbox[] = "WEFT_SANDBOX";
// A scale-out parameter-server job (training.ps.servers > 1): its weft-ps servers' host:port in
// shard order, comma-separated; and, for a weft-ps process, which of them it is.
inline constexpr char kPsServers[] = "WEFT_PS_SERVERS";
inline constexpr char kPsServer[] = "WEFT_PS_SERVER";
// A command job's supervisor: the container its program runs in (ProgramContainer, as JSON).
inline constexpr char kContainer[] = "WEFT_CONTAINER";
// The GPU devices the learner holds on its node, by the host's index (LearnerSlot::gpus),
// comma-separated ("1,3"); unset without GPUs. A command job's program gets it too, with
// CUDA_VISIBLE_DEVICES: the same indices when it runs on the host, 0 … n-1 in a container, which
// sees only its own devices (as Slurm numbers a job's devices inside its cgroup). Neither is
// ever inherited from weftd's own environment.
inline constexpr char kGpus[] = "WEFT_GPUS";
inline constexpr char kCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";
// Never set for a learner, and removed from what it inherits: weftd's own bearer token.
inline constexpr char kForbiddenToken[] = "WEFT_TOKEN";
}  // namespace learner_env

// How weft-learner exits; weftd maps the code to the job's outcome (docs/design.md).
inline constexpr int kLearnerExitOk = 0;
inline constexpr int kLearnerExitRetry = 1;      // a failure worth a restart from a checkpoint
inline constexpr int kLearnerExitUserError = 2;  // bad spec, data or model: fail, do not retry
inline constexpr int kLearnerExitStopped = 143;  // stopped by SIGTERM or by weftd

// The container a command job's program runs in, as the executor decided it: its supervisor
// (weft-learner, on the host) runs the program, and the unpacking of its code, there
// (train/command_process.h; the executor's side is executor/container_launcher.h).
struct ProgramContainer {
  std::string runtime;            // "podman" or "bwrap"; empty: not set
  std::string engine_config_dir;  // podman: weftd's containers.conf and seccomp.json
  std::string image;              // what the program runs on: the job's image, or weft's
  std::string runtime_image;      // weft's runtime image: the code is unpacked on it
  uint32_t uid = 0;               // the job's uid (gid the same)
  std::string network_namespace;  // its gang's (pinned); empty: its own, loopback only
  std::string shm_dir;            // mounted at /dev/shm
  std::string cgroup_parent;      // the learner's cgroup, as a hierarchy path
  int64_t pids_limit = 0;
  double cpus = 0;
  std::vector<int> cpuset;
  std::vector<std::string> devices;  // the program's GPUs, as CDI device names
};
std::string ProgramContainerToJson(const ProgramContainer& c);
// InvalidArgument naming what is wrong with `json`.
absl::StatusOr<ProgramContainer> ProgramContainerFromJson(const std::string& json);

// Everything one learner process needs to start: the executor turns it into the learner's
// environment, the learner reads it back.
struct LearnerLaunch {
  std::string job_id;
  int64_t attempt = 1;
  int rank = 0;
  int world_size = 1;
  std::string node;
  std::string spec_path;            // canonical job spec (JSON) the learner trains from
  std::string data_dir;             // DATA_DIR
  std::string data_format = "idx";  // WEFT_DATA_FORMAT: how DATA_DIR's files are stored
  std::string result_dir;           // RESULT_DIR
  std::string checkpoint_dir;       // CHECKPOINT_DIR
  std::string log_dir;              // LOG_DIR; the executor sends output to LearnerLogPath()
  std::string model_dir;            // MODEL_DIR: the tenant's model definition (job/layout.h)
  std::string work_dir;             // WORK_DIR: a command job's working directory
  std::string private_dir;          // WEFT_PRIVATE_DIR: hidden from a command job's program
  bool sandbox_required = true;     // WEFT_SANDBOX: false if weftd allows unsandboxed commands
  // WEFT_COORDINATOR: host:port of weftd's Coordinator gRPC service, or several comma-separated
  // (weftd in active/standby: every member's, the leader's first)
  std::string coordinator_address;
  std::string coordinator_ca_path;  // WEFT_COORDINATOR_CA; empty: plain text
  // Where rank 0 serves the job's c10d TCPStore for this attempt (MASTER_ADDR, MASTER_PORT);
  // empty for a single learner.
  std::string rendezvous_host;
  int rendezvous_port = 0;
  // A learner that joins a running elastic job: the generation it joins (> 1) and its rank in
  // it (WORLD_SIZE and MASTER_ADDR/PORT are that generation's). 1 and -1 for a learner started
  // with its attempt, whose rank is `rank`.
  int64_t generation = 1;
  int generation_rank = -1;
  // WEFT_LEARNERS_AS_ONE: world_size when the gang, all on one host, trains as one learner
  // (rank 0, with every learner's threads and batch) while the other ranks stand by; else 1.
  int learners_as_one = 1;
  // WEFT_PS_SERVERS: a scale-out parameter-server job's servers (host:port, shard order).
  std::vector<std::string> ps_servers;
  // WEFT_PS_SERVER: >= 0 when this process is not a learner but the job's parameter server
  // `ps_server` (weft-ps, listening on ps_servers[ps_server]); its rank is then world_size +
  // ps_server, its log ParameterServerLogPath().
  int ps_server = -1;
  int threads = 1;         // intra-op threads (OMP_NUM_THREADS)
  std::string credential;  // WEFT_JOB_CREDENTIAL: authenticates to the coordinator
  // WEFT_PS_CREDENTIAL: authenticates the job's learners to its weft-ps shards, and is all a
  // shard holds (its `credential` is empty: it cannot act as a learner at the coordinator).
  std::string ps_credential;
  // WEFT_PS_TLS_CERT, WEFT_PS_TLS_KEY: the attempt's shard TLS identity (common/tls_identity.h;
  // LearnerCredentials::ParameterServerTls); the key for a shard only. Empty: plain text.
  std::string ps_tls_cert, ps_tls_key;
  std::vector<int> cpuset;  // CPUs to pin the learner to (its node's); not in the environment
  // WEFT_GPUS: the GPU devices it holds on its node, by index (LearnerSlot::gpus). And how its
  // container is given each (CDI device names in the same order, from the node's inventory;
  // "" where the inventory has none); not in the environment.
  std::vector<int> gpus;
  std::vector<std::string> gpu_devices;
  // resources.cpus: the CPU time its container may use, in CPUs (0: no limit); not in the
  // environment.
  double cpus = 0;
  // The image the job names (a podman reference, resolved by weftd); empty: weft's runtime
  // image. Not in the environment (a command job's supervisor learns it from program_container).
  std::string image;
  // WEFT_CONTAINER: for a command job's supervisor, where its program runs (set by the executor).
  ProgramContainer program_container;
  // resources.memory_mb: the executor kills a learner whose memory grows past it; 0 = no limit.
  // Not in the environment.
  int64_t memory_limit_mb = 0;
  // A POSIX shared-memory object (shm_open name) this learner may leave behind when it is killed:
  // rank 0's parameter-server segment in a shared-memory parameter-server job (ps/segment.h).
  // The executor unlinks it once the learner has exited outside a container (inside one, it lies
  // in the container's own /dev/shm). Empty: none. Not in the environment.
  std::string leftover_shm;
};

// Whether `launch` is a command job's learner (a supervisor of the tenant's program).
inline bool IsCommandLearner(const LearnerLaunch& launch) { return !launch.work_dir.empty(); }

// The contract's variables for `launch`, as (name, value) in a fixed order.
std::vector<std::pair<std::string, std::string>> LearnerEnvironment(const LearnerLaunch& launch);

// Every name the contract may set, and kForbiddenToken: what a learner must not inherit from
// weftd's own environment.
const std::vector<std::string>& LearnerEnvironmentNames();

// Reads a launch back from an environment (`getenv`-like lookup, nullptr for unset). Defaults:
// attempt 1, rank 0, world size 1, one thread, MASTER_ADDR 127.0.0.1 for a gang. InvalidArgument
// naming the variable when WEFT_JOB_ID, WEFT_JOB_SPEC, WEFT_COORDINATOR or RESULT_DIR is missing, a
// number does not parse, WEFT_CONTAINER is not a ProgramContainer, WEFT_PS_SERVERS holds an empty
// or over-long address or more than 64, WEFT_GPUS is not a comma-separated list of at most 64
// indices in [0, 1023], the rank (WEFT_GENERATION_RANK for a joining learner) is
// outside [0, WORLD_SIZE), WEFT_LEARNERS_AS_ONE is neither 1 nor WORLD_SIZE, or MASTER_PORT is
// missing for WORLD_SIZE > 1.
absl::StatusOr<LearnerLaunch> LearnerLaunchFromEnvironment(
    const std::function<const char*(const char*)>& getenv);

}  // namespace weft
