// The manifest's `training` section: the optimizer, the batch, the schedule, and how the
// learners exchange gradients (`sync`: allreduce, or a parameter server with its consistency).
#include "job/field_reader.h"

namespace weft::spec_internal {
namespace {

constexpr int64_t kMaxStaleness = 1000;

// `ps: {consistency, staleness, servers}`, for `sync: ps` only.
void ReadParameterServer(FieldReader& r, const YAML::Node& n, TrainingSpec* t) {
  if (!n) return;
  if (t->sync != "ps") {
    r.Error("training.ps", "applies only to training.sync: ps");
    return;
  }
  if (!r.Mapping(n, "training.ps", {"consistency", "staleness", "servers"})) return;
  r.String(n, "training.ps", "consistency", &t->ps.consistency, {"asp", "bsp", "ssp"});
  r.Integer(n, "training.ps", "staleness", &t->ps.staleness, 0, kMaxStaleness,
            "an integer in [0, 1000]");
  if (n["staleness"] && t->ps.consistency != "ssp") {
    r.Error("training.ps.staleness", "applies only to consistency: ssp");
  }
  r.Integer(n, "training.ps", "servers", &t->ps.servers, 1, kMaxParameterServers,
            "an integer in [1, 64]");
}

}  // namespace

void ReadTraining(FieldReader& r, const YAML::Node& n, JobSpec* spec) {
  if (!n) {
    r.Error("training", "is required (at least training.epochs)");
    return;
  }
  if (!r.Mapping(n, "training",
                 {"epochs", "batch_size", "optimizer", "learning_rate", "lr_scaling", "momentum",
                  "weight_decay", "seed", "eval_every_steps", "threads", "sync", "ps"})) {
    return;
  }
  if (!n["epochs"]) r.Error("training.epochs", "is required: a positive integer");
  TrainingSpec& t = spec->training;
  r.Integer(n, "training", "epochs", &t.epochs, 1, kMaxEpochs, "a positive integer up to 10000");
  r.Integer(n, "training", "batch_size", &t.batch_size, 1, kMaxBatchSize, "a positive integer");
  r.String(n, "training", "optimizer", &t.optimizer, {"adam", "sgd"});
  r.Real(n, "training", "learning_rate", &t.learning_rate, 0, 10, true, "a number in (0, 10]");
  r.String(n, "training", "lr_scaling", &t.lr_scaling, {"none", "linear", "sqrt"});
  r.Real(n, "training", "momentum", &t.momentum, 0, 1, false, "a number in [0, 1)");
  if (t.momentum >= 1) r.Error("training.momentum", "must be a number in [0, 1), got 1");
  if (n["momentum"] && t.optimizer != "sgd") {
    r.Error("training.momentum", "applies only to optimizer sgd");
  }
  r.Real(n, "training", "weight_decay", &t.weight_decay, 0, 1, false, "a number in [0, 1]");
  r.Integer(n, "training", "seed", &t.seed, 0, INT64_MAX, "a non-negative integer");
  r.Integer(n, "training", "eval_every_steps", &t.eval_every_steps, 0, INT64_MAX,
            "a non-negative integer (0 = only at epoch ends)");
  r.Integer(n, "training", "threads", &t.threads, 1, kMaxThreads, "a positive integer up to 256");
  r.String(n, "training", "sync", &t.sync, {"allreduce", "ps"});
  ReadParameterServer(r, n["ps"], &t);
}

}  // namespace weft::spec_internal
