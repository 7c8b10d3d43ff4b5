// A Reporter for the learner's unit tests: records every metric sample, model and checkpoint the
// learner would send weftd, and accepts every commit.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "train/reporter.h"

namespace weft::testing {

class RecordingReporter : public train::Reporter {
 public:
  absl::Status Register(int, const std::vector<int>&) override { return absl::OkStatus(); }
  std::vector<std::string> ResumeFrom() const override { return {}; }
  void Report(const train::MetricSample& m, const train::ProgressReport&) override {
    samples.push_back(m);
  }
  void ReportProgress(const train::ProgressReport&) override {}
  bool KeepRunning() const override { return true; }
  absl::Status CommitModel(const train::ModelFile& m) override {
    models.push_back(m);
    return absl::OkStatus();
  }
  absl::Status CommitCheckpoint(const std::string& path, int, int64_t step, int64_t bytes,
                                double) override {
    checkpoints[step] = {path, bytes};
    return absl::OkStatus();
  }
  void Finish(bool, const std::string&, double) override {}

  std::vector<train::MetricSample> samples;
  std::vector<train::ModelFile> models;
  std::map<int64_t, std::pair<std::string, int64_t>> checkpoints;  // step -> (path, bytes)
};

}  // namespace weft::testing
