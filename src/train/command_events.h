// What a command job's program tells weft: JSON lines it appends to $WEFT_METRICS_FILE
// (docs/manifest.md "Command jobs"; sdk/python/weft_job.py writes them). Every line is tenant
// input: parsed strictly, bounded, and a path it names is only ever a path inside WORK_DIR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::train {

// The longest line the metrics file may hold, in bytes; a longer one is skipped.
inline constexpr size_t kMaxCommandEventBytes = 64 * 1024;
// The bounds of a line's fields: a path's bytes, a count (step, steps_total, samples: integers a
// double holds exactly), an epoch (epoch, epochs_total), a loss's magnitude, samples per second.
inline constexpr size_t kMaxCommandPathBytes = 4096;
inline constexpr int64_t kMaxCommandCount = int64_t{1} << 53;
inline constexpr int64_t kMaxCommandEpochs = 1000000;
inline constexpr double kMaxCommandLoss = 1e30;
inline constexpr double kMaxCommandSamplesPerS = 1e12;

struct CommandEvent {
  // kMetrics: {"step": 120, "epoch": 1, "train_loss": 0.41, "test_accuracy": 0.86, ...}
  // kCheckpoint: {"checkpoint": "ckpt.pt", "step": 120, "epoch": 1}
  // kModel: {"model": "model.pt", "test_accuracy": 0.86, "step": 120, "epoch": 1}
  enum class Kind { kMetrics, kCheckpoint, kModel };
  Kind kind = Kind::kMetrics;
  std::string path;  // kCheckpoint, kModel: relative to WORK_DIR, no "." or ".." components
  int64_t step = 0;  // optimizer steps taken (required on every line)
  int epoch = 0;     // epochs completed
  std::optional<int> epochs_total;
  std::optional<int64_t> steps_total;
  std::optional<int64_t> samples;       // training samples consumed, the whole job's
  std::optional<double> train_loss;     // finite
  std::optional<double> samples_per_s;  // finite, >= 0
  std::optional<double> test_accuracy;  // in [0, 1]
  std::optional<double> test_loss;      // finite
};

// Parses one line. `work_dir` is WORK_DIR: an absolute path the program names must lie inside
// it and comes back relative. InvalidArgument naming the field and the problem, e.g.
// "test_accuracy: must be a number in [0, 1], got 3"; unknown fields are errors.
absl::StatusOr<CommandEvent> ParseCommandEvent(absl::string_view line, absl::string_view work_dir);

// `path` (from the program) as a path relative to `work_dir`: InvalidArgument unless it is a
// relative path, or an absolute one under work_dir, of at most 4096 bytes whose components are
// not empty, "." or "..", without control characters.
absl::StatusOr<std::string> PathInsideWorkDir(absl::string_view path, absl::string_view work_dir);

}  // namespace weft::train
