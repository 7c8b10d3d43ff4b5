#include "sim/workload.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/csv.h"

namespace weft::sim {

namespace {

bool ParseUtc(const std::string& text, double* seconds) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (end == nullptr || *end != '\0') return false;
  *seconds = static_cast<double>(timegm(&tm));
  return true;
}

std::string Stem(const std::string& path) {
  std::string f = path.substr(path.find_last_of('/') + 1);
  if (absl::EndsWith(f, ".csv")) f.resize(f.size() - 4);
  return f;
}

// A profiled job's learner-seconds per epoch by world size, "1:20.5 2:21.3 4:24.0": learners
// ascending, each a positive integer, each time > 0.
absl::StatusOr<std::vector<std::pair<int, double>>> ParseByLearners(const std::string& text,
                                                                    const std::string& where) {
  std::vector<std::pair<int, double>> out;
  for (absl::string_view item : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const size_t colon = item.find(':');
    int learners = 0;
    double seconds = 0;
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(item.substr(0, colon), &learners) ||
        !absl::SimpleAtod(item.substr(colon + 1), &seconds) || learners < 1 || !(seconds > 0) ||
        !std::isfinite(seconds) || (!out.empty() && learners <= out.back().first)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " learner_seconds_by_learners: '", item,
          "' is not LEARNERS:SECONDS (learners ascending, each a positive integer; seconds > 0)"));
    }
    out.emplace_back(learners, seconds);
  }
  return out;
}

// A live replay's jobs (sim/replay.h), one per row.
absl::Status ReadProfiledJobs(const CsvTable& t, const std::string& path, Workload* w) {
  const char* kColumns[] = {"name",
                            "time",
                            "min_learners",
                            "max_learners",
                            "epochs",
                            "deliver_epochs",
                            "learner_seconds_per_epoch"};
  int c[7];
  for (int k = 0; k < 7; ++k) {
    c[k] = t.Column(kColumns[k]);
    if (c[k] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       ": profiled jobs need name,time,min_learners,max_learners,epochs,"
                       "deliver_epochs,learner_seconds_per_epoch"));
    }
  }
  w->profiled_jobs = true;
  const int by_learners = t.Column("learner_seconds_by_learners");
  const int start_cost = t.Column("start_seconds"), resize_cost = t.Column("resize_seconds");
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& r = t.rows[i];
    const std::string where = absl::StrCat(path, ":", i + 2);
    WorkloadJob j;
    j.name = r[c[0]];
    double v[5];
    for (int k = 0; k < 5; ++k) {
      auto n = ParseNumber(r[c[k + 1]], absl::StrCat(where, " ", kColumns[k + 1]));
      if (!n.ok()) return n.status();
      v[k] = *n;
    }
    j.submit_s = v[0];
    j.min_replicas = static_cast<int>(v[1]);
    j.replicas = static_cast<int>(v[2]);
    j.epochs = v[3];
    j.deliver_epochs = v[4];
    auto lse = ParseNumber(r[c[6]], where + " learner_seconds_per_epoch");
    if (!lse.ok()) return lse.status();
    j.learner_seconds_per_epoch = *lse;
    if (j.min_replicas < 1 || j.replicas < j.min_replicas || v[1] != j.min_replicas ||
        v[2] != j.replicas) {
      return absl::InvalidArgumentError(where +
                                        ": need integers 1 <= min_learners <= max_learners");
    }
    if (!(j.epochs > 0) || j.deliver_epochs < 0 || !(j.learner_seconds_per_epoch > 0)) {
      return absl::InvalidArgumentError(
          where + ": epochs and learner_seconds_per_epoch must be > 0, deliver_epochs >= 0");
    }
    if (by_learners >= 0) {
      auto measured = ParseByLearners(r[by_learners], where);
      if (!measured.ok()) return measured.status();
      j.learner_seconds_by_learners = *std::move(measured);
    }
    for (auto [column, cost] :
         {std::pair{start_cost, &j.start_seconds}, std::pair{resize_cost, &j.resize_seconds}}) {
      if (column < 0 || r[column].empty()) continue;
      auto n = ParseNumber(r[column], absl::StrCat(where, " ", t.header[column]));
      if (!n.ok()) return n.status();
      if (!(*n >= 0) || *n > 3600) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " ", t.header[column], ": must be in [0, 3600] seconds"));
      }
      *cost = *n;
    }
    w->jobs.push_back(std::move(j));
  }
  return absl::OkStatus();
}

}  // namespace

double WorkloadJob::LearnerSecondsPerEpoch(int learners) const {
  const auto& m = learner_seconds_by_learners;
  if (m.empty()) return learner_seconds_per_epoch;
  if (learners <= m.front().first) return m.front().second;
  for (size_t k = 1; k < m.size(); ++k) {
    if (learners <= m[k].first) {
      const double f = static_cast<double>(learners - m[k - 1].first) /
                       static_cast<double>(m[k].first - m[k - 1].first);
      return m[k - 1].second + f * (m[k].second - m[k - 1].second);
    }
  }
  return m.back().second;
}

absl::StatusOr<Workload> ReadWorkload(const std::string& path, int* skipped) {
  auto t = ReadCsv(path);
  if (!t.ok()) return t.status();
  Workload w;
  w.name = Stem(path);
  int skip = 0;
  if (t->Column("application") >= 0) {
    int cn = t->Column("name"), ct = t->Column("time"), ca = t->Column("application"),
        cr = t->Column("num_replicas"), cb = t->Column("batch_size");
    if (cn < 0 || ct < 0 || cr < 0 || cb < 0) {
      return absl::InvalidArgumentError(
          path + ": a Pollux workload needs name,time,application,num_replicas,batch_size");
    }
    for (size_t i = 0; i < t->rows.size(); ++i) {
      const auto& r = t->rows[i];
      WorkloadJob j;
      j.name = r[cn];
      j.app = r[ca];
      std::string where = absl::StrCat(path, ":", i + 2);
      auto time = ParseNumber(r[ct], where + " time");
      if (!time.ok()) return time.status();
      j.submit_s = *time;
      if (!absl::SimpleAtoi(r[cr], &j.replicas) || j.replicas < 1) {
        return absl::InvalidArgumentError(where + ": num_replicas must be a positive integer");
      }
      if (!absl::SimpleAtoi(r[cb], &j.batch_size) || j.batch_size < 1) {
        return absl::InvalidArgumentError(where + ": batch_size must be a positive integer");
      }
      w.jobs.push_back(std::move(j));
    }
  } else if (t->Column("learner_seconds_per_epoch") >= 0) {
    absl::Status s = ReadProfiledJobs(*t, path, &w);
    if (!s.ok()) return s;
  } else if (t->Column("timestamp") >= 0) {
    w.duration_jobs = true;
    int cts = t->Column("timestamp"), cd = t->Column("duration"), cg = t->Column("num_gpus"),
        cc = t->Column("cluster");
    if (cd < 0 || cg < 0) {
      return absl::InvalidArgumentError(path + ": a Philly log needs timestamp,duration,num_gpus");
    }
    double earliest = 1e300;
    for (size_t i = 0; i < t->rows.size(); ++i) {
      const auto& r = t->rows[i];
      std::string where = absl::StrCat(path, ":", i + 2);
      double ts, dur;
      int gpus = 0;
      if (!ParseUtc(r[cts], &ts)) {
        return absl::InvalidArgumentError(where + ": timestamp is not YYYY-MM-DD HH:MM:SS");
      }
      if (r[cg].empty() || r[cd].empty() || !absl::SimpleAtoi(r[cg], &gpus) || gpus < 1 ||
          !absl::SimpleAtod(r[cd], &dur) || dur <= 0) {
        ++skip;
        continue;
      }
      WorkloadJob j;
      j.name = absl::StrCat("philly-", i);
      j.submit_s = ts;
      j.replicas = gpus;
      j.duration_s = dur;
      if (cc >= 0) j.tenant = r[cc];
      earliest = std::min(earliest, ts);
      w.jobs.push_back(std::move(j));
    }
    for (auto& j : w.jobs) j.submit_s -= earliest;
    std::stable_sort(w.jobs.begin(), w.jobs.end(), [](const WorkloadJob& a, const WorkloadJob& b) {
      return a.submit_s < b.submit_s;
    });
  } else {
    return absl::InvalidArgumentError(
        path + ": unknown workload format (expected a Pollux workload or a Philly log header)");
  }
  if (skipped) *skipped = skip;
  return w;
}

absl::StatusOr<std::vector<std::string>> WorkloadFiles(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(path + ": no such file or directory");
  if (!S_ISDIR(st.st_mode)) return std::vector<std::string>{path};
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return absl::NotFoundError(path + ": cannot open directory");
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    std::string f = e->d_name;
    if (absl::EndsWith(f, ".csv")) files.push_back(path + "/" + f);
  }
  closedir(d);
  if (files.empty()) return absl::NotFoundError(path + ": no .csv workloads");
  auto key = [](const std::string& f) {
    std::string s = Stem(f);
    size_t k = s.find_last_not_of("0123456789");
    int num = 0;
    // A stem with no number sorts as 0.
    if (k + 1 >= s.size() || !absl::SimpleAtoi(s.substr(k + 1), &num)) num = 0;
    return std::make_pair(s.substr(0, k + 1), num);
  };
  std::sort(files.begin(), files.end(),
            [&](const auto& a, const auto& b) { return key(a) < key(b); });
  return files;
}

absl::StatusOr<const AppTrace*> AppCatalog::Get(const std::string& app) {
  auto it = apps_.find(app);
  if (it != apps_.end()) return it->second.get();
  auto loaded = AppTrace::Load(dir_ + "/" + app);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat("application '", app, "': ", loaded.status().message()));
  }
  const AppTrace* p = loaded->get();
  apps_.emplace(app, std::move(*loaded));
  return p;
}

}  // namespace weft::sim
