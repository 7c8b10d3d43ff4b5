// The canonical JSON form of a spec (job/job_spec.h SpecToJson): what weftd stores, the learner
// reads back, and the digest a model card names.
#include "common/files.h"
#include "job/job_spec.h"

namespace weft {
namespace {

// The fields every job has: resources, targets, restarts, priority.
void CommonToJson(const JobSpec& s, nlohmann::json* out) {
  nlohmann::json& j = *out;
  nlohmann::json learners = s.resources.learners;
  if (s.resources.elastic) {
    learners = {{"min", s.resources.min_learners}, {"max", s.resources.learners}};
  }
  j["resources"] = {{"learners", learners},
                    {"cpus", s.resources.cpus},
                    {"memory_mb", s.resources.memory_mb},
                    {"gpus", s.resources.gpus},
                    {"placement", s.resources.placement}};
  // Only when not the default, so a spec from before the field has the same canonical form.
  if (s.resources.gang_on_one_host != "one_learner") {
    j["resources"]["gang_on_one_host"] = s.resources.gang_on_one_host;
  }
  if (s.targets.deliver || s.targets.complete) {
    j["targets"]["metric"] = s.targets.metric;
    if (s.targets.deliver) j["targets"]["deliver"] = *s.targets.deliver;
    if (s.targets.complete) j["targets"]["complete"] = *s.targets.complete;
  }
  j["max_restarts"] = s.max_restarts;
  j["priority"] = s.priority;
}

}  // namespace

nlohmann::json SpecToJson(const JobSpec& s) {
  nlohmann::json j;
  j["apiVersion"] = "weft/v1";
  j["kind"] = "TrainingJob";
  j["name"] = s.name;
  if (!s.description.empty()) j["description"] = s.description;
  if (s.IsCommandJob()) {
    j["command"] = s.command;
    j["code"] = s.code;
    if (!s.image.empty()) j["image"] = s.image;
    if (!s.data.dataset.empty()) j["data"]["dataset"] = s.data.dataset;
    if (!s.data.artifact.empty()) j["data"]["artifact"] = s.data.artifact;
    if (s.training.threads > 0) j["training"]["threads"] = s.training.threads;
    j["checkpoint"] = {{"keep", s.checkpoint.keep}};
    CommonToJson(s, &j);
    return j;
  }
  j["model"]["architecture"] = s.model.architecture;
  if (s.model.architecture == "mlp") j["model"]["hidden_units"] = s.model.hidden_units;
  if (s.model.architecture == "torchscript") j["model"]["torchscript"] = s.model.torchscript;
  j["data"] = {{"train_samples", s.data.train_samples}, {"test_samples", s.data.test_samples}};
  if (s.data.artifact.empty()) j["data"]["dataset"] = s.data.dataset;
  if (!s.data.artifact.empty()) j["data"]["artifact"] = s.data.artifact;
  if (!s.data.path.empty()) j["data"]["path"] = s.data.path;
  j["training"] = {{"epochs", s.training.epochs},
                   {"batch_size", s.training.batch_size},
                   {"optimizer", s.training.optimizer},
                   {"learning_rate", s.EffectiveLearningRate()},
                   {"lr_scaling", s.EffectiveLrScaling()},
                   {"weight_decay", s.training.weight_decay},
                   {"seed", s.training.seed},
                   {"eval_every_steps", s.training.eval_every_steps},
                   {"threads", s.EffectiveThreads()}};
  if (s.training.optimizer == "sgd") j["training"]["momentum"] = s.training.momentum;
  if (s.UsesParameterServer()) {  // absent for allreduce: older jobs' digests stay as they were
    j["training"]["sync"] = s.training.sync;
    j["training"]["ps"] = {{"consistency", s.training.ps.consistency},
                           {"servers", s.training.ps.servers}};
    if (s.training.ps.consistency == "ssp")
      j["training"]["ps"]["staleness"] = s.training.ps.staleness;
  }
  j["checkpoint"] = {{"every_steps", s.checkpoint.every_steps},
                     {"every_seconds", s.checkpoint.every_seconds},
                     {"keep", s.checkpoint.keep}};
  // Absent unless set: older jobs' digests stay as they were.
  if (s.checkpoint.at_end) j["checkpoint"]["at_end"] = true;
  CommonToJson(s, &j);
  return j;
}

std::string SpecDigest(const JobSpec& spec) { return Sha256Hex(SpecToJson(spec).dump()); }

bool operator==(const JobSpec& a, const JobSpec& b) { return SpecToJson(a) == SpecToJson(b); }

}  // namespace weft
