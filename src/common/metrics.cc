#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft {
namespace {

// A sample value as Prometheus reads it: integers without a fraction, +Inf/-Inf/NaN spelled out.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // The shortest form that reads back as the same double: 0.001, not 0.0010000000000000000.
  for (int digits : {6, 15, 17}) {
    std::string s = absl::StrFormat("%.*g", digits, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

std::string EscapeValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      out += c;
    }
  }
  return out;
}

// "# HELP" text escapes only backslash and newline.
std::string EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Header(const std::string& name, const std::string& help, const char* type, std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", EscapeHelp(help), "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

MetricsRegistry& MetricsRegistry::Global() {
  static auto* registry = new MetricsRegistry();
  return *registry;
}

void MetricsRegistry::DeclareCounter(const std::string& name, const std::string& help) {
  absl::MutexLock lock(&mu_);
  families_.try_emplace(name, Family{help, false, {}, {}});
}

void MetricsRegistry::DeclareHistogram(const std::string& name, const std::string& help,
                                       std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  std::sort(bounds.begin(), bounds.end());
  families_.try_emplace(name, Family{help, true, std::move(bounds), {}});
}

void MetricsRegistry::Add(const std::string& name, const Labels& labels, double delta) {
  if (!(delta >= 0)) return;
  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it == families_.end() || it->second.histogram) return;
  it->second.series[labels].value += delta;
}

void MetricsRegistry::Observe(const std::string& name, const Labels& labels, double value) {
  if (std::isnan(value)) return;
  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it == families_.end() || !it->second.histogram) return;
  const std::vector<double>& bounds = it->second.bounds;
  Series& s = it->second.series[labels];
  if (s.counts.empty()) s.counts.assign(bounds.size() + 1, 0);
  const size_t bucket = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++s.counts[bucket];
  s.sum += value;
  ++s.count;
}

std::string MetricsRegistry::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    Header(name, f.help, f.histogram ? "histogram" : "counter", &out);
    for (const auto& [labels, s] : f.series) {
      if (!f.histogram) {
        absl::StrAppend(&out, name, RenderLabels(labels), " ", Number(s.value), "\n");
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t b = 0; b <= f.bounds.size(); ++b) {
        cumulative += s.counts[b];
        Labels with_le = labels;
        with_le["le"] = b < f.bounds.size() ? Number(f.bounds[b]) : "+Inf";
        absl::StrAppend(&out, name, "_bucket", RenderLabels(with_le), " ", cumulative, "\n");
      }
      absl::StrAppend(&out, name, "_sum", RenderLabels(labels), " ", Number(s.sum), "\n");
      absl::StrAppend(&out, name, "_count", RenderLabels(labels), " ", s.count, "\n");
    }
  }
  return out;
}

void RenderGauge(const std::string& name, const std::string& help,
                 const std::vector<std::pair<Labels, double>>& values, std::string* out) {
  Header(name, help, "gauge", out);
  for (const auto& [labels, v] : values) {
    absl::StrAppend(out, name, RenderLabels(labels), " ", Number(v), "\n");
  }
}

std::string RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    absl::StrAppend(&out, first ? "" : ",", k, "=\"", EscapeValue(v), "\"");
    first = false;
  }
  return out + "}";
}

JobGauges& JobGauges::Global() {
  static JobGauges* gauges = new JobGauges();
  return *gauges;
}

void JobGauges::Declare(const std::string& name, const std::string& help) {
  absl::MutexLock lock(&mu_);
  help_.emplace(name, help);
}

void JobGauges::Set(const std::string& job, const std::string& name,
                    const std::vector<std::pair<Labels, double>>& series) {
  absl::MutexLock lock(&mu_);
  if (help_.count(name) == 0) return;
  values_[name][job] = series;
}

void JobGauges::RenderAndPrune(const std::map<std::string, Labels>& active, std::string* out) {
  absl::MutexLock lock(&mu_);
  for (auto& [name, jobs] : values_) {
    std::vector<std::pair<Labels, double>> rows;
    for (auto it = jobs.begin(); it != jobs.end();) {
      auto job = active.find(it->first);
      if (job == active.end()) {
        it = jobs.erase(it);
        continue;
      }
      for (const auto& [labels, value] : it->second) {
        Labels all = job->second;
        all.insert(labels.begin(), labels.end());
        rows.emplace_back(std::move(all), value);
      }
      ++it;
    }
    if (!rows.empty()) RenderGauge(name, help_[name], rows, out);
  }
}

std::vector<double> SecondsBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace weft
