// The job manifest: what a tenant asks weft to train, parsed from YAML or JSON and validated.
// Every validation error names the field path (e.g. "training.batch_size") and the problem.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace weft {

// The most epochs a job may train (training.epochs).
inline constexpr int kMaxJobEpochs = 10000;

inline constexpr char kDefaultDataPath[] = "/usr/share/datasets/fashion-mnist";

struct ModelSpec {
  std::string architecture;       // "mlp" or "cnn"; "torchscript" for a tenant's own model
  std::vector<int> hidden_units;  // mlp only: widths of the hidden layers
  // torchscript only: the name of the tenant's artifact holding the module (a file from
  // torch.jit.save) whose forward maps a float32 batch shaped as the data set's samples ([N, 1,
  // 28, 28] for IDX images, [N, F] for CSV) to logits [N, classes]. weftd links it into the job's
  // MODEL_DIR at submission (job/layout.h TorchScriptPath).
  std::string torchscript;
};

// 1 to 128 characters of A-Z a-z 0-9 '.' '_' '-', not starting with '.' or '-' (so an artifact
// or data set name is a safe file name and a safe command-line argument). InvalidArgument saying
// what is wrong, e.g. "must not start with '.' or '-'".
absl::Status CheckArtifactName(std::string_view name);

struct DataSpec {
  // A data set the admin registered (weft dataset add; DatasetRecord), by name (the rule of
  // CheckArtifactName). weftd resolves it to a directory when the job's learners start.
  std::string dataset = "fashion-mnist";
  // Or the tenant's own small data set: the name of an artifact (weft artifact upload) holding a
  // tensor file (format tensors: torch.save of {"train_x", "train_y", "test_x", "test_y"}).
  // weftd links it into the job's data directory at submission (job/layout.h). Giving it clears
  // dataset; giving both is an error.
  std::string artifact;
  // A host directory of IDX files: only in specs stored before data sets were registered, whose
  // jobs still run from it. The parser reads it so those specs load; Controller::Submit refuses
  // a new manifest that names it.
  std::string path;
  int64_t train_samples = 0;  // use the first N training samples; 0 = all
  int64_t test_samples = 0;   // evaluate on the first N test samples; 0 = all
};

// How the learners of a `training.sync: ps` job reach their parameter server (docs/manifest.md).
struct PsSpec {
  // "asp" (each gradient applied as it arrives), "bsp" (one version per round, the average of one
  // gradient per learner) or "ssp" (as asp, but no learner runs more than `staleness` gradients
  // ahead of the slowest; Ho et al., NIPS 2013).
  std::string consistency = "asp";
  int64_t staleness = 3;  // ssp only: 0 to 1000
  // 1: GaDei's scale-up server in shared memory, learners on one node; K > 1: the parameters
  // sharded over K weft-ps processes reached over gRPC, learners on any nodes.
  int servers = 1;
};
inline constexpr int kMaxParameterServers = 64;

struct TrainingSpec {
  int epochs = 0;                  // epoch budget (required)
  int batch_size = 64;             // samples per step, per learner
  std::string optimizer = "adam";  // "adam" or "sgd"
  double learning_rate = 0;        // 0 means the optimizer's default (adam 1e-3, sgd 1e-2)
  // How the learning rate grows with the number of learners (effective batch = learners ×
  // batch_size): "linear" (× learners, Goyal et al. 2017), "sqrt" (× sqrt(learners), Krizhevsky
  // 2014 / Hoffer et al. 2017) or "none"; empty means linear for sgd, sqrt for adam.
  std::string lr_scaling;
  double momentum = 0.9;  // sgd only
  double weight_decay = 0;
  uint64_t seed = 0;
  int64_t eval_every_steps = 0;  // also evaluate every N steps; 0 = only at epoch ends
  int threads = 0;               // intra-op threads; 0 = resources.cpus
  // How the learners combine gradients: "allreduce" (synchronous data parallelism over c10d Gloo)
  // or "ps" (a parameter server, `ps`).
  std::string sync = "allreduce";
  PsSpec ps;
};

// The most learners a job may ask for (resources.learners, or its max).
inline constexpr int kMaxLearners = 1024;

struct ResourceSpec {
  // A fixed gang: `learners` processes, all or none. An elastic job (manifest
  // `learners: {min: M, max: N}`): `min_learners` = M to `learners` = N, as many as the scheduler
  // gives it; each learner keeps `training.batch_size` and the learning rate follows the world
  // size through `training.lr_scaling`.
  int learners = 1;
  int min_learners = 1;  // == learners for a fixed gang
  bool elastic = false;
  double cpus = 1;                 // per learner
  int64_t memory_mb = 2048;        // per learner, MiB
  int gpus = 0;                    // per learner
  std::string placement = "pack";  // gang placement: "pack" (fewest nodes) or "spread" (most)
  // A fixed gang whose learners are all placed on one host: "one_learner" (the default) trains
  // it as one learner with their threads and their global batch, which there is as fast as the
  // gang or faster (issue 19; bench/learners_per_host.sh); "learners" keeps one process per
  // learner.
  std::string gang_on_one_host = "one_learner";
};

// Two-tier accuracy targets (TRADL): deliver a model early at `deliver`, finish at `complete`.
struct TargetSpec {
  std::string metric = "test_accuracy";
  std::optional<double> deliver;   // in (0, 1]
  std::optional<double> complete;  // in (0, 1], >= deliver
};

// When the learner writes checkpoints (model, optimizer, position in the data, RNG, best metric).
struct CheckpointSpec {
  int64_t every_steps = 0;     // also every N optimizer steps; 0 = not by steps
  int64_t every_seconds = 60;  // also every N seconds of training; 0 = not by time
  int keep = 2;                // committed checkpoints kept; older ones are deleted
  // Also one when the budget is spent, before the final model: a job that may be trained on
  // with a larger budget (an experiment's trial, promoted) resumes from it. Built-in models.
  bool at_end = false;
};

struct JobSpec {
  std::string name;
  std::string description;
  // A command job runs the tenant's own program as each learner (docs/manifest.md "Command
  // jobs"): `command` is its argv (1 to 64 arguments, each UTF-8 text of at most 4096 bytes
  // without control characters), run in a directory where `code`, the name of the tenant's .tar.gz
  // artifact, is unpacked. Empty for a job whose model weft trains itself.
  std::vector<std::string> command;
  std::string code;
  // A command job's environment: the name of a container image the tenant may use (its own or
  // one the admin granted it; control/images.h), which its program runs on. Empty: weft's runtime
  // image (python3, Debian's torch). Built-in and TorchScript jobs run on weft's runtime image.
  std::string image;
  ModelSpec model;
  DataSpec data;
  TrainingSpec training;
  ResourceSpec resources;
  TargetSpec targets;
  CheckpointSpec checkpoint;
  int max_restarts = 3;  // restarts after learner failures before the job is FAILED
  // Order among the tenant's own jobs, higher first: low = -100, normal = 0, high = 100, or any
  // integer in [-1000, 1000]. A higher-priority job may preempt a lower one of the same tenant.
  int priority = 0;

  // Whether the tenant's own program trains (command is set) rather than weft's loop.
  bool IsCommandJob() const { return !command.empty(); }
  // Whether its learners train through a parameter server (training.sync: ps).
  bool UsesParameterServer() const { return training.sync == "ps"; }
  // The weft-ps processes of a scale-out parameter-server job (training.ps.servers > 1), placed
  // with its learners as one gang; 0 for every other job.
  int ParameterServers() const {
    return UsesParameterServer() && training.ps.servers > 1 ? training.ps.servers : 0;
  }
  // The learning rate actually used (resolves the 0 default per optimizer).
  double EffectiveLearningRate() const;
  // training.lr_scaling, or its default for the optimizer ("linear" for sgd, "sqrt" for adam).
  std::string EffectiveLrScaling() const;
  // The learning rate each learner's optimizer uses in a job of `world_size` learners:
  // EffectiveLearningRate() scaled by EffectiveLrScaling() (unchanged for one learner). A
  // parameter server's is scaled for bsp (each version averages world_size batches) and not for
  // asp and ssp (each version is one learner's batch).
  double ScaledLearningRate(int world_size) const;
  // The intra-op thread count actually used: training.threads, or the cpus request rounded
  // down, never more than that and at least 1.
  int EffectiveThreads() const;
  // How many learners train as one for a gang placed on `learner_nodes` (one node name per
  // learner): all of them when they share one node and resources.gang_on_one_host is
  // "one_learner", for a fixed gang of weft's own training loop with all-reduce (not elastic,
  // not a parameter-server job, not a command job); else 1.
  int LearnersAsOne(const std::vector<std::string>& learner_nodes) const;
  // The spec the one learner of a gang of `learners` (LearnersAsOne) trains by: the gang's
  // global batch (batch_size × learners) at the gang's learning rate (ScaledLearningRate of
  // `learners`, not scaled again), all the gang's threads and cpus, as one learner. The same
  // samples make each step as in the gang, so the training is the gang's up to float rounding,
  // and checkpoints carry over between the two shapes (their position counts samples).
  JobSpec AsOneLearner(int learners) const;
};

// One problem with one field of a manifest, e.g.
// {"training.batch_size", "must be a positive integer, got -3"}.
struct FieldError {
  std::string field;
  std::string problem;
};

// Parses and validates a manifest in YAML or JSON (JSON is read as YAML 1.2).
// Returns the spec with defaults filled in, or InvalidArgument whose message lists every
// problem; when `errors` is given it receives them one by one (field path, problem).
// Unknown fields are errors, so a typo is never silently ignored.
absl::StatusOr<JobSpec> ParseManifest(std::string_view text,
                                      std::vector<FieldError>* errors = nullptr);

// Parameters (weights and biases) of the built-in model: the CNN's 421,642; an MLP's from its
// widths (784 inputs, 10 classes); 0 for a TorchScript model (not known before it is loaded) and
// for a command job.
int64_t ModelParameters(const ModelSpec& model);

// Bytes of one learner's training state in float32: the parameters, their gradients and the
// optimizer's state (Adam: two moments; SGD: one momentum buffer when momentum > 0). Activations
// and the data set come on top; the executor enforces the whole of resources.memory_mb.
int64_t TrainingStateBytes(const JobSpec& spec);

// Checks made when a job is submitted, across fields, that a spec already stored is not
// re-checked against: training.threads within resources.cpus (at most max(1, floor(cpus))
// threads), and the training state within resources.memory_mb. Appends one FieldError per
// problem to `errors` (may be null); InvalidArgument listing them, else OK.
absl::Status CheckResourceFit(const JobSpec& spec, std::vector<FieldError>* errors);

// The canonical JSON form of a spec (every field, defaults included). ParseManifest of its
// dump() gives back an equal spec.
nlohmann::json SpecToJson(const JobSpec& spec);

// SHA-256 (hex) of the canonical JSON form: identifies the exact configuration a model came from.
std::string SpecDigest(const JobSpec& spec);

bool operator==(const JobSpec& a, const JobSpec& b);

}  // namespace weft
