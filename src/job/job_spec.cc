#include "job/job_spec.h"

#include <cmath>
#include <regex>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/text.h"
#include "job/field_reader.h"
#include "yaml-cpp/yaml.h"

namespace weft {
namespace {

using namespace spec_internal;  // NOLINT(google-build-using-namespace): this file's own tools

void ReadModel(FieldReader& r, const YAML::Node& n, JobSpec* spec) {
  if (!n) {
    r.Error("model", "is required (e.g. model: {architecture: cnn})");
    return;
  }
  if (!r.Mapping(n, "model", {"architecture", "hidden_units", "torchscript"})) return;
  if (n["torchscript"]) {
    // A tenant's own model: architecture is torchscript (said or not), and nothing else applies.
    if (n["architecture"] && n["architecture"].IsScalar() &&
        n["architecture"].Scalar() != "torchscript") {
      r.Error("model.architecture", "must be torchscript (or absent) with model.torchscript");
    }
    if (n["hidden_units"]) r.Error("model.hidden_units", "applies only to architecture mlp");
    r.String(n, "model", "torchscript", &spec->model.torchscript);
    if (n["torchscript"].IsScalar()) {
      if (absl::Status s = CheckArtifactName(spec->model.torchscript); !s.ok()) {
        r.Error("model.torchscript",
                absl::StrCat("names an artifact (weft artifact upload): ", s.message()));
      }
    }
    spec->model.architecture = "torchscript";
    return;
  }
  if (!n["architecture"]) {
    r.Error("model.architecture",
            "is required: one of cnn, mlp (or model.torchscript: <your artifact>)");
  }
  r.String(n, "model", "architecture", &spec->model.architecture, {"cnn", "mlp"});
  YAML::Node h = n["hidden_units"];
  if (h) {
    if (spec->model.architecture == "cnn") {
      r.Error("model.hidden_units", "applies only to architecture mlp");
    } else if (!h.IsSequence() || h.size() == 0 || h.size() > 8) {
      r.Error("model.hidden_units", "must be a list of 1 to 8 positive integers");
    } else {
      spec->model.hidden_units.clear();
      for (size_t i = 0; i < h.size(); ++i) {
        int v = 0;
        r.IntegerNode(h[i], absl::StrCat("model.hidden_units[", i, "]"), &v, 1, 65536,
                      "a positive integer up to 65536");
        spec->model.hidden_units.push_back(v);
      }
    }
  }
  if (spec->model.architecture == "mlp" && spec->model.hidden_units.empty()) {
    spec->model.hidden_units = {256, 128};
  }
}

void ReadData(FieldReader& r, const YAML::Node& n, JobSpec* spec) {
  if (!n) return;
  if (!r.Mapping(n, "data", {"dataset", "artifact", "path", "train_samples", "test_samples"})) {
    return;
  }
  r.String(n, "data", "dataset", &spec->data.dataset);
  if (n["dataset"] && n["dataset"].IsScalar()) {
    if (absl::Status s = CheckArtifactName(spec->data.dataset); !s.ok()) {
      r.Error("data.dataset", std::string(s.message()));
    }
  }
  if (n["artifact"]) {
    if (n["dataset"]) {
      r.Error("data.artifact", "give data.dataset or data.artifact, not both");
    }
    spec->data.dataset.clear();
    r.String(n, "data", "artifact", &spec->data.artifact);
    if (n["artifact"].IsScalar()) {
      if (absl::Status s = CheckArtifactName(spec->data.artifact); !s.ok()) {
        r.Error("data.artifact",
                absl::StrCat("names an artifact (weft artifact upload): ", s.message()));
      }
    }
  }
  r.String(n, "data", "path", &spec->data.path);
  if (n["path"] && n["path"].IsScalar() && (spec->data.path.empty() || spec->data.path[0] != '/')) {
    r.Error("data.path", absl::StrCat("must be an absolute directory path, got '",
                                      Printable(spec->data.path), "'"));
  }
  r.Integer(n, "data", "train_samples", &spec->data.train_samples, 0, 100000000,
            "a non-negative integer (0 = all)");
  r.Integer(n, "data", "test_samples", &spec->data.test_samples, 0, 100000000,
            "a non-negative integer (0 = all)");
}

// `learners: N` (a fixed gang) or `learners: {min: M, max: N}` (elastic, 1 <= M <= N <= 1024).
void ReadLearners(FieldReader& r, const YAML::Node& n, ResourceSpec* res) {
  if (!n) return;
  if (!n.IsMap()) {
    r.IntegerNode(n, "resources.learners", &res->learners, 1, kMaxLearners,
                  "a positive integer up to 1024, or {min: M, max: N}");
    res->min_learners = res->learners;
    return;
  }
  if (!r.Mapping(n, "resources.learners", {"min", "max"})) return;
  for (const char* key : {"min", "max"}) {
    if (!n[key]) r.Error(absl::StrCat("resources.learners.", key), "is required");
  }
  int min = 0, max = 0;
  r.Integer(n, "resources.learners", "min", &min, 1, kMaxLearners, "a positive integer up to 1024");
  r.Integer(n, "resources.learners", "max", &max, 1, kMaxLearners, "a positive integer up to 1024");
  if (min == 0 || max == 0) return;
  if (min > max) {
    r.Error("resources.learners.min",
            absl::StrCat("must not exceed resources.learners.max (", min, " > ", max, ")"));
    return;
  }
  res->min_learners = min;
  res->learners = max;
  res->elastic = true;
}

void ReadResources(FieldReader& r, const YAML::Node& n, JobSpec* spec) {
  if (!n) return;
  if (!r.Mapping(n, "resources",
                 {"learners", "cpus", "memory_mb", "gpus", "placement", "gang_on_one_host"})) {
    return;
  }
  ResourceSpec& res = spec->resources;
  ReadLearners(r, n["learners"], &res);
  r.Real(n, "resources", "cpus", &res.cpus, 0, 1024, true, "a number of cores in (0, 1024]");
  r.Integer(n, "resources", "memory_mb", &res.memory_mb, 64, int64_t{1} << 30,
            "an integer number of MiB, at least 64");
  r.Integer(n, "resources", "gpus", &res.gpus, 0, 64, "a non-negative integer");
  r.String(n, "resources", "placement", &res.placement, {"pack", "spread"});
  r.String(n, "resources", "gang_on_one_host", &res.gang_on_one_host, {"one_learner", "learners"});
}

void ReadPriority(FieldReader& r, const YAML::Node& n, JobSpec* spec) {
  if (!n) return;
  if (n.IsScalar()) {
    const std::string v = n.Scalar();
    if (v == "low") {
      spec->priority = -100;
      return;
    }
    if (v == "normal") {
      spec->priority = 0;
      return;
    }
    if (v == "high") {
      spec->priority = 100;
      return;
    }
    int64_t num = 0;
    if (absl::SimpleAtoi(v, &num) && num >= -1000 && num <= 1000) {
      spec->priority = static_cast<int>(num);
      return;
    }
  }
  r.Error("priority",
          absl::StrCat("must be low, normal, high or an integer in [-1000, 1000], got '",
                       n.IsScalar() ? Printable(n.Scalar()) : std::string("(not a scalar)"), "'"));
}

void ReadTargets(FieldReader& r, const YAML::Node& n, JobSpec* spec) {
  if (!n) return;
  if (!r.Mapping(n, "targets", {"metric", "deliver", "complete"})) return;
  TargetSpec& t = spec->targets;
  r.String(n, "targets", "metric", &t.metric, {"test_accuracy"});
  double v = 0;
  if (n["deliver"]) {
    v = -1;
    r.Real(n, "targets", "deliver", &v, 0, 1, true, "a fraction in (0, 1]");
    if (v > 0) t.deliver = v;
  }
  if (n["complete"]) {
    v = -1;
    r.Real(n, "targets", "complete", &v, 0, 1, true, "a fraction in (0, 1]");
    if (v > 0) t.complete = v;
  }
  if (t.deliver && t.complete && *t.deliver > *t.complete) {
    r.Error("targets.deliver",
            absl::StrCat("must not exceed targets.complete (", *t.complete, "), got ", *t.deliver));
  }
}

void ReadCheckpoint(FieldReader& r, const YAML::Node& n, JobSpec* spec) {
  if (!n) return;
  if (!r.Mapping(n, "checkpoint", {"every_steps", "every_seconds", "keep", "at_end"})) return;
  CheckpointSpec& c = spec->checkpoint;
  r.Integer(n, "checkpoint", "every_steps", &c.every_steps, 0, INT64_MAX,
            "a non-negative integer (0 = not by steps)");
  r.Integer(n, "checkpoint", "every_seconds", &c.every_seconds, 0, 86400,
            "a number of seconds in [0, 86400] (0 = not by time)");
  r.Integer(n, "checkpoint", "keep", &c.keep, 1, 100, "an integer in [1, 100]");
  r.Boolean(n, "checkpoint", "at_end", &c.at_end);
}

// command: the argv of the tenant's program, and code: the artifact it comes in.
void ReadCommand(FieldReader& r, const YAML::Node& doc, JobSpec* spec) {
  constexpr size_t kMaxArguments = 64;
  YAML::Node n = doc["command"];
  if (!n) return;
  if (!n.IsSequence() || n.size() == 0 || n.size() > kMaxArguments) {
    r.Error("command", absl::StrCat("must be a list of 1 to ", kMaxArguments,
                                    " strings, the program and its arguments (e.g. [python3, "
                                    "train.py, --epochs, \"3\"])"));
    return;
  }
  std::vector<std::string> argv;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string field = absl::StrCat("command[", i, "]");
    if (!n[i].IsScalar()) {
      r.Error(field, "must be a string");
      continue;
    }
    const std::string& arg = n[i].Scalar();
    if (std::string problem = TextProblem(arg, false); !problem.empty()) {
      r.Error(field, absl::StrCat("must be UTF-8 text without control characters; it ", problem));
    } else if (arg.size() > kMaxStringBytes) {
      r.Error(field, absl::StrCat("must be at most ", kMaxStringBytes, " bytes, got ", arg.size()));
    }
    argv.push_back(arg);
  }
  if (!argv.empty() && argv[0].empty()) r.Error("command[0]", "must name the program to run");
  spec->command = argv;
  if (!doc["code"]) {
    r.Error("code",
            "is required with command: the name of your .tar.gz artifact (weft artifact "
            "upload code.tar.gz --name NAME)");
    return;
  }
  r.String(doc, "", "code", &spec->code);
  if (doc["code"].IsScalar()) {
    if (absl::Status s = CheckArtifactName(spec->code); !s.ok()) {
      r.Error("code", absl::StrCat("names an artifact (weft artifact upload): ", s.message()));
    }
  }
  if (doc["image"]) {
    r.String(doc, "", "image", &spec->image);
    if (doc["image"].IsScalar()) {
      if (absl::Status s = CheckArtifactName(spec->image); !s.ok()) {
        r.Error("image", absl::StrCat("names an image (weft image list): ", s.message()));
      }
    }
  }
}

// What else a command job may say: the program trains, so there is no model, and of training
// only the threads it gets; data names a data set only when the program reads one (DATA_DIR).
void ReadCommandJobFields(FieldReader& r, const YAML::Node& doc, JobSpec* spec) {
  if (doc["model"]) r.Error("model", "does not apply to a command job: your program is the model");
  spec->data.dataset.clear();
  if (YAML::Node d = doc["data"]) {
    if (r.Mapping(d, "data", {"dataset", "artifact"})) {
      if (!d["dataset"] && !d["artifact"]) {
        r.Error("data", "names data.dataset or data.artifact when it is given");
      }
      ReadData(r, d, spec);
    }
  }
  if (YAML::Node t = doc["training"]) {
    if (r.Mapping(t, "training", {"threads"})) {
      r.Integer(t, "training", "threads", &spec->training.threads, 1, kMaxThreads,
                "a positive integer up to 256");
    }
  }
  const YAML::Node c = doc["checkpoint"];
  if (c && c.IsMap() && (c["every_steps"] || c["every_seconds"] || c["at_end"])) {
    r.Error(c["every_steps"]     ? "checkpoint.every_steps"
            : c["every_seconds"] ? "checkpoint.every_seconds"
                                 : "checkpoint.at_end",
            "does not apply to a command job: your program checkpoints when it chooses "
            "(weft_job.save_checkpoint); checkpoint.keep does apply");
  }
}

void ReadDocument(FieldReader& r, const YAML::Node& doc, JobSpec* spec) {
  if (!r.Mapping(
          doc, "",
          {"apiVersion", "kind", "name", "description", "command", "code", "image", "model", "data",
           "training", "resources", "targets", "checkpoint", "max_restarts", "priority"})) {
    return;
  }
  std::string api = "weft/v1";
  r.String(doc, "", "apiVersion", &api, {"weft/v1"});
  std::string kind = "TrainingJob";
  r.String(doc, "", "kind", &kind, {"TrainingJob"});
  if (!doc["name"]) {
    r.Error("name", "is required: lower-case letters, digits and '-', at most 63 characters");
  } else {
    r.String(doc, "", "name", &spec->name);
    static const std::regex kName("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?");
    if (doc["name"].IsScalar() && TextProblem(doc["name"].Scalar()).empty() &&
        !std::regex_match(spec->name, kName)) {
      r.Error("name", absl::StrCat("must be lower-case letters, digits and '-' (at most 63, "
                                   "starting and ending alphanumeric), got '",
                                   Printable(spec->name), "'"));
    }
  }
  r.String(doc, "", "description", &spec->description, {}, kMaxStringBytes, /*multiline=*/true);
  ReadCommand(r, doc, spec);
  if (spec->IsCommandJob()) {
    ReadCommandJobFields(r, doc, spec);
  } else {
    if (doc["code"]) r.Error("code", "applies only to a command job (command: [...])");
    if (doc["image"]) {
      r.Error("image",
              "applies only to a command job (command: [...]): built-in and TorchScript jobs run "
              "on weft's runtime image");
    }
    ReadModel(r, doc["model"], spec);
    ReadData(r, doc["data"], spec);
    ReadTraining(r, doc["training"], spec);
  }
  ReadResources(r, doc["resources"], spec);
  if (!spec->IsCommandJob() && spec->resources.gpus > 0) {
    r.Error("resources.gpus",
            "built-in and TorchScript models train on CPUs: weft's learner is built on Debian's "
            "libtorch, which has no CUDA; a command job (command: [...]) running your own "
            "PyTorch in its image gets GPUs");
  }
  if (spec->IsCommandJob() && spec->resources.elastic) {
    r.Error("resources.learners",
            "a command job asks for a fixed number of learners: your program, not weft, would "
            "have to follow a change of world size");
  }
  if (spec->UsesParameterServer()) {
    if (spec->IsCommandJob()) {
      r.Error("training.sync", "applies only to a job whose model weft trains");
    } else if (spec->resources.elastic) {
      r.Error("resources.learners",
              "a parameter-server job (training.sync: ps) asks for a fixed number of learners");
    } else if (spec->resources.placement == "spread" && spec->training.ps.servers == 1) {
      r.Error("resources.placement",
              "a parameter-server job (training.sync: ps, servers: 1) runs its learners on one "
              "node, beside its shared-memory server; it cannot be spread (servers: 2 or more "
              "shard the parameters over weft-ps processes, and the learners may spread)");
    }
  }
  ReadTargets(r, doc["targets"], spec);
  ReadCheckpoint(r, doc["checkpoint"], spec);
  r.Integer(doc, "", "max_restarts", &spec->max_restarts, 0, 100, "an integer in [0, 100]");
  ReadPriority(r, doc["priority"], spec);
}

}  // namespace

double JobSpec::EffectiveLearningRate() const {
  if (training.learning_rate > 0) return training.learning_rate;
  return training.optimizer == "sgd" ? 1e-2 : 1e-3;
}

std::string JobSpec::EffectiveLrScaling() const {
  if (!training.lr_scaling.empty()) return training.lr_scaling;
  return training.optimizer == "sgd" ? "linear" : "sqrt";
}

double JobSpec::ScaledLearningRate(int world_size) const {
  const double base = EffectiveLearningRate();
  const std::string rule = EffectiveLrScaling();
  if (world_size <= 1 || rule == "none") return base;
  if (UsesParameterServer() && training.ps.consistency != "bsp") return base;
  return rule == "linear" ? base * world_size : base * std::sqrt(static_cast<double>(world_size));
}

int JobSpec::EffectiveThreads() const {
  const int granted = std::max(1, static_cast<int>(std::floor(resources.cpus)));
  return training.threads > 0 ? std::min(training.threads, granted) : granted;
}

int JobSpec::LearnersAsOne(const std::vector<std::string>& learner_nodes) const {
  if (learner_nodes.size() < 2 || resources.gang_on_one_host != "one_learner" ||
      resources.elastic || UsesParameterServer() || IsCommandJob()) {
    return 1;
  }
  for (const std::string& node : learner_nodes) {
    if (node != learner_nodes[0]) return 1;
  }
  return static_cast<int>(learner_nodes.size());
}

JobSpec JobSpec::AsOneLearner(int learners) const {
  JobSpec one = *this;
  if (learners < 2) return one;
  one.training.learning_rate = ScaledLearningRate(learners);
  one.training.lr_scaling = "none";
  one.training.batch_size = training.batch_size * learners;
  one.training.threads = EffectiveThreads() * learners;
  one.resources.cpus = resources.cpus * learners;
  one.resources.memory_mb = resources.memory_mb * learners;
  one.resources.learners = one.resources.min_learners = 1;
  return one;
}

absl::Status CheckArtifactName(std::string_view name) {
  constexpr size_t kMaxChars = 128;
  if (name.empty()) return absl::InvalidArgumentError("is required");
  if (name.size() > kMaxChars) {
    return absl::InvalidArgumentError(
        absl::StrCat("is ", name.size(), " characters; at most ", kMaxChars));
  }
  if (name[0] == '.' || name[0] == '-') {
    return absl::InvalidArgumentError("must not start with '.' or '-'");
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrFormat(
          "has '%s' at byte %d; only letters, digits, '.', '_' and '-' are allowed",
          absl::ascii_isprint(c) ? std::string(1, c) : absl::StrFormat("\\x%02x", c & 0xff), i));
    }
  }
  return absl::OkStatus();
}

int64_t ModelParameters(const ModelSpec& model) {
  if (model.architecture == "torchscript" || model.architecture.empty()) return 0;
  auto dense = [](int64_t in, int64_t out) { return in * out + out; };
  if (model.architecture == "cnn") {
    // conv 1->32 3x3, conv 32->64 3x3, fc 64*7*7->128, fc 128->10 (train/models.cc).
    return (1 * 32 * 9 + 32) + (32 * 64 * 9 + 64) + dense(64 * 7 * 7, 128) + dense(128, 10);
  }
  int64_t in = 28 * 28, n = 0;
  for (int h : model.hidden_units) {
    n += dense(in, h);
    in = h;
  }
  return n + dense(in, 10);
}

int64_t TrainingStateBytes(const JobSpec& spec) {
  int64_t copies = 2;  // parameters and gradients
  if (spec.training.optimizer == "adam") copies += 2;
  if (spec.training.optimizer == "sgd" && spec.training.momentum > 0) copies += 1;
  return ModelParameters(spec.model) * copies * static_cast<int64_t>(sizeof(float));
}

absl::Status CheckResourceFit(const JobSpec& spec, std::vector<FieldError>* errors) {
  std::vector<FieldError> found;
  const int granted = std::max(1, static_cast<int>(std::floor(spec.resources.cpus)));
  if (spec.training.threads > granted) {
    found.push_back({"training.threads",
                     absl::StrCat(spec.training.threads, " threads need at least ",
                                  spec.training.threads, " cpus; resources.cpus grants ",
                                  spec.resources.cpus, ", so at most ", granted, " threads")});
  }
  constexpr int64_t kMiB = int64_t{1} << 20;
  const int64_t state = TrainingStateBytes(spec);
  if (state > spec.resources.memory_mb * kMiB) {
    const int64_t need_mb = (state + kMiB - 1) / kMiB;
    found.push_back(
        {"resources.memory_mb",
         absl::StrCat(spec.resources.memory_mb, " MiB cannot hold the ", spec.model.architecture,
                      "'s ", ModelParameters(spec.model), " parameters with their gradients and ",
                      spec.training.optimizer, " state (", need_mb, " MiB); ask for more than ",
                      need_mb, " MiB or a smaller model")});
  }
  if (found.empty()) return absl::OkStatus();
  std::vector<std::string> parts;
  for (const auto& e : found) parts.push_back(absl::StrCat(e.field, ": ", e.problem));
  if (errors) errors->insert(errors->end(), found.begin(), found.end());
  return absl::InvalidArgumentError(absl::StrCat("invalid manifest: ", absl::StrJoin(parts, "; ")));
}

absl::StatusOr<JobSpec> ParseManifest(std::string_view text, std::vector<FieldError>* errors) {
  std::vector<FieldError> local;
  JobSpec spec;
  RETURN_IF_ERROR(spec_internal::ReadManifestText(
      text, "manifest", errors ? errors : &local,
      [&spec](FieldReader& r, const YAML::Node& doc) { ReadDocument(r, doc, &spec); }));
  return spec;
}

namespace spec_internal {

absl::Status ReadManifestText(std::string_view text, const std::string& what,
                              std::vector<FieldError>* errors,
                              const std::function<void(FieldReader&, const YAML::Node&)>& read) {
  errors->clear();
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    errors->push_back(
        {"(document)", absl::StrCat("is not valid YAML or JSON: line ", e.mark.line + 1,
                                    ", column ", e.mark.column + 1, ": ", Printable(e.msg))});
  }
  if (errors->empty()) {
    FieldReader reader(errors);
    try {
      read(reader, doc);
    } catch (const YAML::Exception& e) {
      errors->push_back({"(document)", absl::StrCat("cannot be read: ", Printable(e.what()))});
    }
  }
  if (errors->empty()) return absl::OkStatus();
  std::vector<std::string> parts;
  for (const auto& e : *errors) parts.push_back(absl::StrCat(e.field, ": ", e.problem));
  return absl::InvalidArgumentError(
      absl::StrCat("invalid ", what, ": ", absl::StrJoin(parts, "; ")));
}

}  // namespace spec_internal

}  // namespace weft
