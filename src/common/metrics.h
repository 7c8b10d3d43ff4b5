// Process metrics in the Prometheus text exposition format (version 0.0.4,
// https://prometheus.io/docs/instrumenting/exposition_formats/): counters and histograms that
// the code updates as things happen, and gauges a caller computes when a scrape asks. Debian 12
// has no prometheus-cpp; this is the small part of it weftd needs. Thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace weft {

// Label name -> value, e.g. {{"route", "/v1/jobs"}, {"code", "200"}}. Values may hold any text;
// Render escapes backslash, double quote and newline, and drops other control characters.
using Labels = std::map<std::string, std::string>;

class MetricsRegistry {
 public:
  // The process's registry (weftd has one; tests may make their own).
  static MetricsRegistry& Global();

  // Declares a metric family once: its help text and, for histograms, the upper bounds of its
  // buckets in ascending order (the +Inf bucket is implied). Declaring again changes nothing.
  void DeclareCounter(const std::string& name, const std::string& help);
  void DeclareHistogram(const std::string& name, const std::string& help,
                        std::vector<double> bounds);

  // Adds `delta` (>= 0) to a counter's series with `labels`; an undeclared name is ignored.
  void Add(const std::string& name, const Labels& labels, double delta = 1);
  // Records one observation (seconds, bytes, ...) in a histogram's series with `labels`.
  void Observe(const std::string& name, const Labels& labels, double value);

  // The declared families with every series they have, sorted by name, in the text format.
  std::string Render() const;

 private:
  struct Series {
    double value = 0;              // counter
    std::vector<uint64_t> counts;  // histogram: per bucket (not cumulative), +Inf last
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    std::string help;
    bool histogram = false;
    std::vector<double> bounds;
    std::map<Labels, Series> series;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
};

// Values that jobs' learners report as totals they count themselves (a parameter server's
// versions, gradients by staleness), kept per job until a scrape finds the job no longer active.
// Thread-safe.
class JobGauges {
 public:
  static JobGauges& Global();
  // Declares a family once (its help text); Set for an undeclared name is ignored.
  void Declare(const std::string& name, const std::string& help);
  // Replaces job `job`'s series of family `name`: labels (beyond the job's own) -> value.
  void Set(const std::string& job, const std::string& name,
           const std::vector<std::pair<Labels, double>>& series);
  // Appends every family's series of the jobs in `active` (job id -> labels that identify it,
  // e.g. tenant and job) to `out`, and forgets every other job.
  void RenderAndPrune(const std::map<std::string, Labels>& active, std::string* out);

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> help_ ABSL_GUARDED_BY(mu_);
  // family -> job -> series
  std::map<std::string, std::map<std::string, std::vector<std::pair<Labels, double>>>> values_
      ABSL_GUARDED_BY(mu_);
};

// Appends one family of gauges to `out` in the text format: "# HELP", "# TYPE name gauge" and a
// line per (labels, value).
void RenderGauge(const std::string& name, const std::string& help,
                 const std::vector<std::pair<Labels, double>>& values, std::string* out);

// `{a="x",b="y"}` (empty for no labels), values escaped as the format requires.
std::string RenderLabels(const Labels& labels);

// Buckets for durations in seconds: 1 ms to 60 s.
std::vector<double> SecondsBuckets();

}  // namespace weft
