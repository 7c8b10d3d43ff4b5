#include "train/command_events.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/text.h"
#include "nlohmann/json.hpp"

namespace weft::train {
namespace {

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status ReadInteger(const nlohmann::json& j, const char* key, int64_t max,
                         std::optional<int64_t>* out) {
  auto it = j.find(key);
  if (it == j.end()) return absl::OkStatus();
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > max) {
    return FieldError(
        key, absl::StrCat("must be an integer in [0, ", max, "], got ", Printable(it->dump(), 40)));
  }
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadNumber(const nlohmann::json& j, const char* key, double lo, double hi,
                        std::optional<double>* out) {
  auto it = j.find(key);
  if (it == j.end()) return absl::OkStatus();
  const bool ok = it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() >= lo &&
                  it->get<double>() <= hi;
  if (!ok) {
    return FieldError(key, absl::StrCat("must be a number in [", lo, ", ", hi, "], got ",
                                        Printable(it->dump(), 40)));
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> PathInsideWorkDir(absl::string_view path, absl::string_view work_dir) {
  if (path.empty()) return absl::InvalidArgumentError("is empty");
  if (path.size() > kMaxCommandPathBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("is ", path.size(), " bytes; at most ", kMaxCommandPathBytes));
  }
  if (std::string problem = TextProblem(std::string(path)); !problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("must be text without control characters; it ", problem));
  }
  absl::string_view rel = path;
  if (rel.front() == '/') {
    const std::string prefix = absl::StrCat(work_dir, "/");
    if (rel.substr(0, prefix.size()) != prefix) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", Printable(std::string(path)), "' is not inside WORK_DIR ", work_dir));
    }
    rel.remove_prefix(prefix.size());
  }
  for (absl::string_view part : absl::StrSplit(rel, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("'", Printable(std::string(path)),
                       "' must name a file inside WORK_DIR without '.', '..' or '//'"));
    }
  }
  return std::string(rel);
}

absl::StatusOr<CommandEvent> ParseCommandEvent(absl::string_view line, absl::string_view work_dir) {
  if (line.size() > kMaxCommandEventBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the line is ", line.size(), " bytes; at most ", kMaxCommandEventBytes));
  }
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("is not a JSON object on one line");
  }
  static const char* const kKnown[] = {"step",      "epoch",      "epochs_total",  "steps_total",
                                       "samples",   "train_loss", "samples_per_s", "test_accuracy",
                                       "test_loss", "checkpoint", "model"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) return FieldError(FieldName(key), "is not a field weft knows");
  }
  CommandEvent e;
  if (j.contains("checkpoint") && j.contains("model")) {
    return absl::InvalidArgumentError("a line announces a checkpoint or a model, not both");
  }
  for (const char* key : {"checkpoint", "model"}) {
    if (!j.contains(key)) continue;
    e.kind = key[0] == 'c' ? CommandEvent::Kind::kCheckpoint : CommandEvent::Kind::kModel;
    if (!j[key].is_string()) return FieldError(key, "must be the path of the file written");
    absl::StatusOr<std::string> rel = PathInsideWorkDir(j[key].get<std::string>(), work_dir);
    if (!rel.ok()) return FieldError(key, rel.status().message());
    e.path = *rel;
  }
  std::optional<int64_t> step, epoch, epochs_total;
  if (!j.contains("step")) return FieldError("step", "is required: the optimizer steps taken");
  absl::Status s = ReadInteger(j, "step", kMaxCommandCount, &step);
  if (s.ok()) s = ReadInteger(j, "epoch", kMaxCommandEpochs, &epoch);
  if (s.ok()) s = ReadInteger(j, "epochs_total", kMaxCommandEpochs, &epochs_total);
  if (s.ok()) s = ReadInteger(j, "steps_total", kMaxCommandCount, &e.steps_total);
  if (s.ok()) s = ReadInteger(j, "samples", kMaxCommandCount, &e.samples);
  if (s.ok()) s = ReadNumber(j, "train_loss", -kMaxCommandLoss, kMaxCommandLoss, &e.train_loss);
  if (s.ok()) s = ReadNumber(j, "samples_per_s", 0, kMaxCommandSamplesPerS, &e.samples_per_s);
  if (s.ok()) s = ReadNumber(j, "test_accuracy", 0, 1, &e.test_accuracy);
  if (s.ok()) s = ReadNumber(j, "test_loss", -kMaxCommandLoss, kMaxCommandLoss, &e.test_loss);
  if (!s.ok()) return s;
  e.step = *step;
  e.epoch = static_cast<int>(epoch.value_or(0));
  if (epochs_total) e.epochs_total = static_cast<int>(*epochs_total);
  if (e.kind == CommandEvent::Kind::kModel && !e.test_accuracy) {
    return FieldError("test_accuracy", "is required with model: the model's test accuracy");
  }
  return e;
}

}  // namespace weft::train
