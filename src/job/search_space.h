// A hyperparameter search space (an experiment's `search.space`, docs/manifest.md): manifest
// fields of the experiment's base job, each with the values a trial may give it, and the trial
// manifests made from them. Drawing is counter-based: trial i's values depend only on the seed
// and i, never on what was drawn before, so a searcher rebuilt after a restart draws the same
// trials, and the "position of the random stream" is the number of trials started.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_spec.h"
#include "yaml-cpp/yaml.h"

namespace weft {

// The most dimensions a space has, and the most choices one dimension has.
inline constexpr size_t kMaxSearchDimensions = 16;
inline constexpr size_t kMaxSearchChoices = 64;

struct SearchDimension {
  enum class Kind {
    kUniform,     // {uniform: [low, high]}: a real number, uniform in [low, high]
    kLogUniform,  // {loguniform: [low, high]}: a real number whose log is uniform; 0 < low
    kIntUniform,  // {int: [low, high]}: an integer, uniform in [low, high]
    kChoice,      // {choice: [v1, v2, …]}: one of the values (numbers, text, booleans, lists)
  };
  std::string field;  // the manifest field it sets, dotted: "training.learning_rate"
  Kind kind = Kind::kChoice;
  double low = 0, high = 0;          // the range of kUniform, kLogUniform, kIntUniform
  std::vector<std::string> choices;  // kChoice: each value in YAML's flow style: 64, adam, [64, 32]
};

struct SearchSpace {
  std::vector<SearchDimension> dimensions;  // in the order the manifest lists them
};

// A trial's values: (field, value in YAML's flow style), in the space's order.
using Hyperparameters = std::vector<std::pair<std::string, std::string>>;

// Reads `space`, a mapping of field → distribution (the fields under `model.` or `training.`).
// InvalidArgument listing every problem, each naming its field under `path` (e.g.
// "search.space.training.learning_rate: loguniform needs 0 < low < high, got [0, 0.1]"); when
// `errors` is given it receives them one by one.
absl::StatusOr<SearchSpace> ParseSearchSpace(const YAML::Node& space,
                                             const std::string& path = "search.space",
                                             std::vector<FieldError>* errors = nullptr);

// Trial `trial`'s values drawn from `space` with `seed`: reals with 6 significant digits,
// integers exact, choices as written. The same (space, seed, trial) always gives the same values.
// A space of choices only (a grid, GridSize) is drawn without replacement: trials 0 … GridSize-1
// are its points in an order the seed shuffles, so no configuration is trained twice until all
// were (a trial's training is deterministic: a repeat would only repeat its result); later trials
// are drawn independently.
Hyperparameters SampleTrial(const SearchSpace& space, uint64_t seed, int64_t trial);

// The points of a grid over `space`: the product of its choices' counts, or 0 when a dimension is
// not a choice (a grid needs every dimension listed).
int64_t GridSize(const SearchSpace& space);
// Point `index` (0 <= index < GridSize) of the grid; the last dimension varies fastest.
Hyperparameters GridPoint(const SearchSpace& space, int64_t index);

// The job manifest of a trial: `base` (a job manifest, YAML or JSON) with `name` and each field of
// `values` set, checked by ParseManifest. InvalidArgument when the result is not a valid job,
// naming the fields (a value the job refuses, e.g. "training.batch_size: must be a positive
// integer, got '0'"), or when `base` is not a mapping.
absl::StatusOr<std::string> TrialManifest(std::string_view base, const Hyperparameters& values,
                                          const std::string& name);

// Whether every value `space` can give makes a valid job of `base`: the ends of each range and
// every choice, one dimension at a time on the base as it is (a space whose fields only make a
// job together — momentum with optimizer sgd — needs the base to hold one of them).
// InvalidArgument naming "<path>.<field>" and the manifest's problem with the value.
absl::Status CheckSpaceAgainstBase(std::string_view base, const SearchSpace& space,
                                   const std::string& path = "search.space");

}  // namespace weft
