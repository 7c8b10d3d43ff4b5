#include "job/experiment_spec.h"

#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/text.h"
#include "job/field_reader.h"

namespace weft {
namespace {

using spec_internal::Describe;
using spec_internal::FieldReader;
using spec_internal::kMaxEpochs;
using spec_internal::kMaxStringBytes;

constexpr size_t kMaxExperimentName = 56;  // a trial's name adds "-t" and up to 4 digits: 63

void ReadName(FieldReader& r, const YAML::Node& doc, ExperimentSpec* e) {
  if (!doc["name"]) {
    r.Error("name", "is required: lower-case letters, digits and '-', at most 56 characters");
    return;
  }
  r.String(doc, "", "name", &e->name);
  static const std::regex kName("[a-z0-9]([-a-z0-9]{0,54}[a-z0-9])?");
  if (doc["name"].IsScalar() && TextProblem(doc["name"].Scalar()).empty() &&
      !std::regex_match(e->name, kName)) {
    r.Error("name",
            absl::StrCat("must be lower-case letters, digits and '-' (at most ", kMaxExperimentName,
                         ", starting and ending alphanumeric), got '", Printable(e->name), "'"));
  }
}

// The base job: valid on its own (named as trial 0), problems named under `job.`.
void ReadBase(FieldReader& r, const YAML::Node& doc, ExperimentSpec* e) {
  const YAML::Node job = doc["job"];
  if (!job) {
    r.Error("job", "is required: the job each trial runs, with its fields searched");
    return;
  }
  if (!job.IsMap()) {
    r.Error("job", absl::StrCat("must be a job manifest (a mapping), got ", Describe(job)));
    return;
  }
  if (job["targets"]) {
    r.Error("job.targets",
            "an experiment's targets are its own (targets: at the top), not each trial's");
  }
  YAML::Node named = YAML::Clone(job);
  named["name"] = e->name.empty() ? "trial" : absl::StrCat(e->name, "-t0");
  YAML::Emitter out;
  out << named;
  e->base = out.c_str();
  std::vector<FieldError> errors;
  absl::StatusOr<JobSpec> spec = ParseManifest(e->base, &errors);
  for (const FieldError& f : errors) {
    r.Error(f.field == "(document)" ? "job" : absl::StrCat("job.", f.field), f.problem);
  }
  if (!spec.ok()) {
    e->base.clear();
    return;
  }
  e->base_spec = *spec;
  if (e->base_spec.IsCommandJob()) {
    r.Error("job.command",
            "a command job cannot be searched yet: its values would reach the program as "
            "arguments or environment, which experiments do not pass; built-in and TorchScript "
            "jobs can");
    e->base.clear();
  }
}

void ReadSearch(FieldReader& r, const YAML::Node& doc, ExperimentSpec* e) {
  const YAML::Node s = doc["search"];
  if (!s) {
    r.Error("search", "is required: the space and the searcher");
    return;
  }
  if (!r.Mapping(s, "search",
                 {"space", "searcher", "eta", "min_resource", "max_resource", "max_trials",
                  "max_concurrent_trials", "seed", "metric"})) {
    return;
  }
  r.String(s, "search", "searcher", &e->searcher, {"random", "grid", "asha"});
  r.String(s, "search", "metric", &e->metric, {"test_accuracy", "test_loss"});
  if (e->searcher != "asha") {
    for (const char* key : {"eta", "min_resource"}) {
      if (s[key]) r.Error(absl::StrCat("search.", key), "applies only to searcher asha");
    }
  }
  r.Integer(s, "search", "eta", &e->eta, 2, 16, "an integer in [2, 16]");
  r.Integer(s, "search", "min_resource", &e->min_resource, 1, kMaxEpochs,
            "a number of epochs in [1, 10000]");
  r.Integer(s, "search", "max_resource", &e->max_resource, 1, kMaxEpochs,
            "a number of epochs in [1, 10000]");
  r.Integer(s, "search", "max_trials", &e->max_trials, 1, kMaxExperimentTrials,
            "an integer in [1, 1000]");
  r.Integer(s, "search", "max_concurrent_trials", &e->max_concurrent_trials, 1,
            kMaxConcurrentTrials, "an integer in [1, 64]");
  int64_t seed = 0;
  r.Integer(s, "search", "seed", &seed, 0, int64_t{1} << 62, "an integer in [0, 2^62]");
  e->seed = static_cast<uint64_t>(seed);
  if (!s["space"]) {
    r.Error("search.space", "is required: the fields searched and their distributions");
    return;
  }
  std::vector<FieldError> errors;
  absl::StatusOr<SearchSpace> space = ParseSearchSpace(s["space"], "search.space", &errors);
  for (const FieldError& f : errors) r.Error(f.field, f.problem);
  if (space.ok()) e->space = *space;
}

// What depends on the base job and the space both.
void CheckTogether(FieldReader& r, const YAML::Node& doc, ExperimentSpec* e) {
  if (e->base.empty() || e->space.dimensions.empty()) return;
  if (absl::Status s = CheckSpaceAgainstBase(e->base, e->space); !s.ok()) {
    r.Error("search.space", std::string(s.message()));
  }
  for (const SearchDimension& d : e->space.dimensions) {
    if (d.field == "training.epochs") {
      r.Error("search.space.training.epochs",
              "the searcher sets each trial's epochs (search.max_resource, and ASHA's rungs)");
    }
  }
  if (e->max_resource == 0) e->max_resource = e->base_spec.training.epochs;
  if (e->searcher == "asha" && e->max_resource < e->min_resource) {
    r.Error("search.max_resource", absl::StrCat("is ", e->max_resource,
                                                " epochs, below "
                                                "min_resource ",
                                                e->min_resource));
  }
  if (e->searcher == "grid") {
    const int64_t points = GridSize(e->space);
    if (points == 0) {
      r.Error("search.space", "searcher grid needs every field to be a choice");
    } else if (!doc["search"]["max_trials"]) {
      e->max_trials = std::min(points, kMaxExperimentTrials);
    } else if (e->max_trials > points) {
      r.Error("search.max_trials",
              absl::StrCat("is ", e->max_trials, "; the grid has ", points, " points"));
    }
  }
}

void ReadTargets(FieldReader& r, const YAML::Node& doc, ExperimentSpec* e) {
  const YAML::Node t = doc["targets"];
  if (!t || !r.Mapping(t, "targets", {"deliver", "complete"})) return;
  r.Real(t, "targets", "deliver", &e->deliver, 0, 1, true, "a test accuracy in (0, 1]");
  r.Real(t, "targets", "complete", &e->complete, 0, 1, true, "a test accuracy in (0, 1]");
  if (e->deliver > 0 && e->complete > 0 && e->deliver > e->complete) {
    r.Error("targets.deliver", "must not exceed targets.complete");
  }
}

void ReadDocument(FieldReader& r, const YAML::Node& doc, ExperimentSpec* e) {
  if (!r.Mapping(doc, "",
                 {"apiVersion", "kind", "name", "description", "job", "search", "targets"})) {
    return;
  }
  std::string api = "weft/v1";
  r.String(doc, "", "apiVersion", &api, {"weft/v1"});
  if (!doc["kind"]) {
    r.Error("kind", "is required: Experiment");
  } else {
    std::string kind;
    r.String(doc, "", "kind", &kind, {"Experiment"});
  }
  ReadName(r, doc, e);
  r.String(doc, "", "description", &e->description, {}, kMaxStringBytes, /*multiline=*/true);
  ReadBase(r, doc, e);
  ReadSearch(r, doc, e);
  ReadTargets(r, doc, e);
  CheckTogether(r, doc, e);
}

}  // namespace

absl::StatusOr<ExperimentSpec> ParseExperiment(std::string_view text,
                                               std::vector<FieldError>* errors) {
  std::vector<FieldError> local;
  ExperimentSpec e;
  RETURN_IF_ERROR(spec_internal::ReadManifestText(
      text, "experiment", errors ? errors : &local,
      [&e](FieldReader& r, const YAML::Node& doc) { ReadDocument(r, doc, &e); }));
  return e;
}

std::string TrialName(const ExperimentSpec& experiment, int64_t trial) {
  return absl::StrCat(experiment.name, "-t", trial);
}

absl::StatusOr<std::string> TrialJobManifest(const ExperimentSpec& experiment, int64_t trial,
                                             const Hyperparameters& values, int64_t epochs) {
  Hyperparameters all = values;
  all.emplace_back("training.epochs", absl::StrCat(epochs));
  // Below the top rung it may be promoted: it keeps its last step to be trained on from there.
  if (epochs < experiment.max_resource) all.emplace_back("checkpoint.at_end", "true");
  // The experiment's targets are each trial's: the first to deliver has a delivered model, and
  // one that meets `complete` stops there.
  if (experiment.deliver > 0) all.emplace_back("targets.deliver", absl::StrCat(experiment.deliver));
  if (experiment.complete > 0) {
    all.emplace_back("targets.complete", absl::StrCat(experiment.complete));
  }
  return TrialManifest(experiment.base, all, TrialName(experiment, trial));
}

}  // namespace weft
