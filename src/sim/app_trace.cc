#include "sim/app_trace.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/csv.h"

namespace weft::sim {

namespace {

constexpr double kEps = 1e-8;  // the artifact's tolerance for ceil/floor

// max_epochs and bmax overrides from the artifact's applications.py.
struct Override {
  const char* name;
  int max_epochs;
  int max_local_bsz;  // 0 = from placements.csv
};
constexpr Override kOverrides[] = {
    {"bert", 2, 0},      {"cifar10", 100, 0}, {"deepspeech2", 80, 0},
    {"imagenet", 90, 0}, {"ncf", 10, 0},      {"yolov3", 50, 8},
};

absl::StatusOr<std::vector<double>> Column(const CsvTable& t, const std::string& name,
                                           const std::string& path) {
  int c = t.Column(name);
  if (c < 0) return absl::InvalidArgumentError(absl::StrCat(path, ": no column '", name, "'"));
  std::vector<double> out;
  out.reserve(t.rows.size());
  for (size_t i = 0; i < t.rows.size(); ++i) {
    auto v = ParseNumber(t.rows[i][c], absl::StrCat(path, " row ", i + 2, " ", name));
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return out;
}

uint64_t CacheKey(int64_t measured_id, int nodes, int replicas, int local_bsz) {
  if (measured_id > 0)
    return (static_cast<uint64_t>(measured_id) << 20) | static_cast<uint64_t>(local_bsz);
  return (1ull << 62) | (static_cast<uint64_t>(nodes) << 40) |
         (static_cast<uint64_t>(replicas) << 20) | static_cast<uint64_t>(local_bsz);
}

}  // namespace

int64_t CanonicalPlacementId(const NodeCounts& placement) {
  NodeCounts p;
  for (int c : placement) {
    if (c > 0) p.push_back(c);
  }
  if (p.empty()) return 0;
  NodeCounts best = p;
  for (size_t i = 1; i < p.size(); ++i) {
    NodeCounts rot(p.begin() + i, p.end());
    rot.insert(rot.end(), p.begin(), p.begin() + i);
    if (rot < best) best = rot;
  }
  int64_t id = 0;
  for (int c : best) {
    // Counts >= 10 do not occur with 4 GPUs per node; keep them distinct anyway.
    id = id * (c >= 10 ? 100 : 10) + c;
  }
  return id;
}

absl::Status AppTrace::LoadPlacements(const std::string& d, std::vector<Delaunay3::Point>* points,
                                      std::vector<double>* values) {
  const std::string ppath = d + "/placements.csv";
  auto pt = ReadCsv(ppath);
  if (!pt.ok()) return pt.status();
  int pc = pt->Column("placement");
  if (pc < 0) return absl::InvalidArgumentError(ppath + ": no column 'placement'");
  auto lb = Column(*pt, "local_bsz", ppath);
  auto st = Column(*pt, "step_time", ppath);
  auto sy = Column(*pt, "sync_time", ppath);
  for (const auto* c : {&lb, &st, &sy}) {
    if (!c->ok()) return c->status();
  }
  if (pt->rows.empty()) return absl::InvalidArgumentError(ppath + ": no rows");
  // Grouped (nodes, replicas, local_bsz) means, the first part of the 3-D point set.
  std::map<std::array<double, 3>, std::array<double, 3>> grouped;  // key -> sum step, sum sync, n
  bmin_ = INT32_MAX;
  bmax_ = 0;
  for (size_t i = 0; i < pt->rows.size(); ++i) {
    const std::string& ptxt = pt->rows[i][pc];
    NodeCounts counts;
    for (char ch : ptxt) {
      if (ch < '0' || ch > '9') {
        return absl::InvalidArgumentError(
            absl::StrCat(ppath, " row ", i + 2, ": bad placement '", ptxt, "'"));
      }
      counts.push_back(ch - '0');
    }
    placements_[CanonicalPlacementId(counts)].push_back({(*lb)[i], (*st)[i], (*sy)[i]});
    int replicas = 0;
    for (int c : counts) replicas += c;
    auto& g = grouped[{static_cast<double>(ptxt.size()), static_cast<double>(replicas), (*lb)[i]}];
    g[0] += (*st)[i];
    g[1] += (*sy)[i];
    g[2] += 1;
    bmin_ = std::min(bmin_, static_cast<int>((*lb)[i]));
    bmax_ = std::max(bmax_, static_cast<int>((*lb)[i]));
  }
  for (auto& [id, rows] : placements_) {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Row& a, const Row& b) { return a.local_bsz < b.local_bsz; });
  }
  for (const auto& [key, g] : grouped) {
    points->push_back(key);
    values->push_back(g[0] / g[2]);
    values->push_back(g[1] / g[2]);
  }
  return absl::OkStatus();
}

absl::Status AppTrace::LoadScalability(const std::string& d, std::vector<Delaunay3::Point>* points,
                                       std::vector<double>* values) {
  const std::string spath = d + "/scalability.csv";
  auto sc = ReadCsv(spath);
  if (absl::IsNotFound(sc.status())) return absl::OkStatus();  // optional
  if (!sc.ok()) return sc.status();
  auto nn = Column(*sc, "num_nodes", spath);
  auto nr = Column(*sc, "num_replicas", spath);
  auto sl = Column(*sc, "local_bsz", spath);
  auto ss = Column(*sc, "step_time", spath);
  auto sx = Column(*sc, "sync_time", spath);
  for (const auto* c : {&nn, &nr, &sl, &ss, &sx}) {
    if (!c->ok()) return c->status();
  }
  for (size_t i = 0; i < sc->rows.size(); ++i) {
    points->push_back({(*nn)[i], (*nr)[i], (*sl)[i]});
    values->push_back((*ss)[i]);
    values->push_back((*sx)[i]);
  }
  return absl::OkStatus();
}

absl::Status AppTrace::LoadValidations(const std::string& d) {
  DIR* dh = opendir(d.c_str());
  if (dh == nullptr) return absl::NotFoundError(absl::StrCat(d, ": cannot open directory"));
  std::vector<std::string> vfiles;
  while (dirent* e = readdir(dh)) {
    std::string f = e->d_name;
    if (absl::StartsWith(f, "validation-") && absl::EndsWith(f, ".csv")) vfiles.push_back(f);
  }
  closedir(dh);
  for (const std::string& f : vfiles) {
    Validation v;
    std::string b = f.substr(11, f.size() - 15);
    if (!absl::SimpleAtoi(b, &v.batch_size) || v.batch_size <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(d, "/", f, ": batch size not a positive integer"));
    }
    const std::string vpath = d + "/" + f;
    auto vt = ReadCsv(vpath);
    if (!vt.ok()) return vt.status();
    auto pr = Column(*vt, "progress", vpath);
    auto it = Column(*vt, "iteration", vpath);
    auto gs = Column(*vt, "grad_sqr", vpath);
    auto gv = Column(*vt, "grad_var", vpath);
    auto me = Column(*vt, "metric", vpath);
    for (const auto* c : {&pr, &it, &gs, &gv, &me}) {
      if (!c->ok()) return c->status();
    }
    v.progress = *pr;
    v.iteration = *it;
    v.metric = *me;
    v.grad_sqr = *gs;
    v.grad_var = *gv;
    if (v.progress.empty()) return absl::InvalidArgumentError(vpath + ": no rows");
    validations_.push_back(std::move(v));
  }
  if (validations_.empty()) return absl::InvalidArgumentError(d + ": no validation-<B>.csv");
  std::sort(validations_.begin(), validations_.end(),
            [](const Validation& a, const Validation& b) { return a.batch_size < b.batch_size; });
  return absl::OkStatus();
}

void AppTrace::IndexEpochs() {
  b0_ = validations_.front().batch_size;
  bmax_total_ = validations_.back().batch_size;
  size_t rows = SIZE_MAX;
  for (const Validation& v : validations_) rows = std::min(rows, v.progress.size());
  max_epochs_ = static_cast<int>(rows);
  for (const Override& o : kOverrides) {
    if (name_ == o.name) {
      max_epochs_ = std::min<int>(o.max_epochs, static_cast<int>(rows));
      if (o.max_local_bsz > 0) bmax_ = o.max_local_bsz;
    }
  }
  epoch_start_.assign(max_epochs_ + 1, 0.0);
  for (int e = 1; e <= max_epochs_; ++e) {
    double p = INFINITY;
    for (const Validation& v : validations_) p = std::min(p, v.progress[e - 1]);
    epoch_start_[e] = p;
  }
}

absl::StatusOr<std::unique_ptr<AppTrace>> AppTrace::Load(const std::string& dir) {
  auto app = std::make_unique<AppTrace>();
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  app->name_ = d.substr(d.find_last_of('/') + 1);
  std::vector<Delaunay3::Point> points;
  std::vector<double> values;
  if (absl::Status s = app->LoadPlacements(d, &points, &values); !s.ok()) return s;
  if (absl::Status s = app->LoadScalability(d, &points, &values); !s.ok()) return s;
  if (points.size() >= 4) {
    auto del = Delaunay3::Build(std::move(points), std::move(values), 2);
    if (!del.ok()) return del.status();
    app->scatter_ = std::move(*del);
  }
  if (absl::Status s = app->LoadValidations(d); !s.ok()) return s;
  app->IndexEpochs();
  return app;
}

absl::StatusOr<StepTime> AppTrace::Step(const NodeCounts& placement, int local_bsz) const {
  int nodes = 0, replicas = 0;
  for (int c : placement) {
    if (c > 0) {
      ++nodes;
      replicas += c;
    }
  }
  if (replicas == 0) return absl::InvalidArgumentError("empty placement");
  int64_t id = CanonicalPlacementId(placement);
  auto measured = placements_.find(id);
  bool is_measured = measured != placements_.end();
  uint64_t key = CacheKey(is_measured ? id : 0, std::min(nodes, 16), replicas, local_bsz);
  auto hit = cache_.find(key);
  if (hit != cache_.end()) return hit->second;

  StepTime t;
  if (is_measured) {
    const auto& rows = measured->second;
    double b = local_bsz;
    if (b < rows.front().local_bsz || b > rows.back().local_bsz) {
      return absl::OutOfRangeError(absl::StrCat(name_, ": local batch ", local_bsz,
                                                " outside the measurements of placement ", id));
    }
    // As scipy's interp1d: hi = first row with batch >= b (at least the second row), lo = the
    // row before, value = slope × (b − b_lo) + y_lo. Matching its arithmetic keeps the epoch
    // crossing times, which are rounded to whole seconds, identical.
    size_t hi = 1;
    while (hi < rows.size() - 1 && rows[hi].local_bsz < b) ++hi;
    if (rows.size() == 1) {
      t = {rows[0].step_s, rows[0].sync_s};
    } else {
      const Row& l = rows[hi - 1];
      const Row& h = rows[hi];
      double dx = h.local_bsz - l.local_bsz;
      t = {(h.step_s - l.step_s) / dx * (b - l.local_bsz) + l.step_s,
           (h.sync_s - l.sync_s) / dx * (b - l.local_bsz) + l.sync_s};
    }
  } else {
    double out[2];
    if (!scatter_ ||
        !scatter_->Interpolate({static_cast<double>(std::min(nodes, 16)),
                                static_cast<double>(replicas), static_cast<double>(local_bsz)},
                               out)) {
      return absl::OutOfRangeError(absl::StrCat(name_, ": (", nodes, " nodes, ", replicas,
                                                " replicas, local batch ", local_bsz,
                                                ") outside the measured hull"));
    }
    t = {out[0], out[1]};
  }
  cache_.emplace(key, t);
  return t;
}

double AppTrace::MetricAt(double progress) const {
  const std::vector<double>& m = validations_.front().metric;
  if (max_epochs_ < 1) return 0;
  if (progress <= epoch_start_[1]) return m[0];
  for (int e = 1; e < max_epochs_; ++e) {
    const double a = epoch_start_[e], b = epoch_start_[e + 1];
    if (progress <= b)
      return b > a ? m[e - 1] + (m[e] - m[e - 1]) * (progress - a) / (b - a) : m[e];
  }
  return m[max_epochs_ - 1];
}

std::vector<int> AppTrace::ValidatedBatchSizes() const {
  std::vector<int> sizes;
  for (const Validation& v : validations_) sizes.push_back(v.batch_size);
  return sizes;
}

std::optional<double> AppTrace::MetricAfter(int batch_size, int epochs) const {
  for (const Validation& v : validations_) {
    if (v.batch_size != batch_size) continue;
    const int rows = std::min<int>(max_epochs_, static_cast<int>(v.metric.size()));
    if (rows < 1) return std::nullopt;
    return v.metric[std::clamp(epochs, 1, rows) - 1];
  }
  return std::nullopt;
}

AppTrace::Targets AppTrace::TargetsAt(double fraction) const {
  Targets t;
  const std::vector<double>& m = validations_.front().metric;
  const int last = std::max(1, max_epochs_);
  t.complete = m[last - 1];
  t.higher_is_better = m[last - 1] >= m[0];
  t.deliver = MetricAt(std::clamp(fraction, 0.0, 1.0) * epoch_start_[last]);
  auto reached = [&](double metric) {
    return t.higher_is_better ? metric >= t.deliver : metric <= t.deliver;
  };
  // The first epoch end whose metric reaches the target, then back along the segment before it to
  // where the line crosses the target.
  t.deliver_progress = epoch_start_[last];
  for (int e = 1; e <= last; ++e) {
    if (!reached(m[e - 1])) continue;
    t.deliver_progress = epoch_start_[e];
    if (e > 1 && m[e - 1] != m[e - 2]) {
      const double f = (t.deliver - m[e - 2]) / (m[e - 1] - m[e - 2]);
      t.deliver_progress =
          epoch_start_[e - 1] + std::clamp(f, 0.0, 1.0) * (epoch_start_[e] - epoch_start_[e - 1]);
    }
    break;
  }
  return t;
}

void AppTrace::Bracket(double batch_size, const Validation** lo, const Validation** hi,
                       double* x) const {
  *lo = &validations_.front();
  *hi = &validations_.back();
  for (const Validation& v : validations_) {
    if (v.batch_size <= batch_size) *lo = &v;
  }
  for (auto it = validations_.rbegin(); it != validations_.rend(); ++it) {
    if (it->batch_size >= batch_size) *hi = &*it;
  }
  if (batch_size <= validations_.front().batch_size) *lo = *hi = &validations_.front();
  if (batch_size >= validations_.back().batch_size) *lo = *hi = &validations_.back();
  *x = batch_size;
}

namespace {
// numpy.interp between two points: slope × (x − x_lo) + y_lo, exact at the upper end.
double Interp2(double x, double x_lo, double x_hi, double y_lo, double y_hi) {
  if (x_lo == x_hi || x <= x_lo) return y_lo;
  if (x >= x_hi) return y_hi;
  return (y_hi - y_lo) / (x_hi - x_lo) * (x - x_lo) + y_lo;
}
}  // namespace

AppTrace::GradStats AppTrace::Grad(double batch_size, int epoch) const {
  const Validation *lo, *hi;
  double x;
  Bracket(batch_size, &lo, &hi, &x);
  size_t e = std::min<size_t>(epoch, lo->grad_sqr.size() - 1);
  size_t eh = std::min<size_t>(epoch, hi->grad_sqr.size() - 1);
  GradStats g;
  g.sqr = Interp2(x, lo->batch_size, hi->batch_size, lo->grad_sqr[e], hi->grad_sqr[eh]);
  g.var = Interp2(x, lo->batch_size, hi->batch_size, lo->grad_var[e], hi->grad_var[eh]);
  return g;
}

double AppTrace::EpochStart(int epoch) const {
  return epoch_start_[std::clamp(epoch, 0, max_epochs_)];
}

double AppTrace::Iterations(double batch_size, int epoch) const {
  const Validation *lo, *hi;
  double x;
  Bracket(batch_size, &lo, &hi, &x);
  size_t e = std::min<size_t>(epoch, lo->iteration.size() - 1);
  size_t eh = std::min<size_t>(epoch, hi->iteration.size() - 1);
  return Interp2(x, lo->batch_size, hi->batch_size, lo->iteration[e], hi->iteration[eh]);
}

BatchConfig AppTrace::FixedBatch(int batch_size, int replicas, bool force_accum_single) const {
  BatchConfig c;
  double local = std::ceil(static_cast<double>(batch_size) / replicas - kEps);
  c.accum_steps = static_cast<int>(std::ceil(local / bmax_ - kEps)) - 1;
  if (replicas == 1 && (force_accum_single || batch_size > b0_)) {
    c.accum_steps = std::max(c.accum_steps, 1);
  }
  c.atomic_bsz = static_cast<int>(std::ceil(local / (c.accum_steps + 1) - kEps));
  int count = replicas * (c.accum_steps + 1);
  c.atomic_bsz = std::min(c.atomic_bsz, static_cast<int>(static_cast<double>(bmax_total_) / count));
  return c;
}

double AppTrace::ProgressRate(const NodeCounts& placement, BatchConfig cfg, int epoch) const {
  int replicas = 0;
  for (int c : placement) replicas += c;
  if (replicas == 0) return 0;
  auto t = Step(placement, cfg.atomic_bsz);
  if (!t.ok()) return 0;
  double batch = static_cast<double>(replicas) * cfg.atomic_bsz * (cfg.accum_steps + 1);
  double t_iter = t->step_s + cfg.accum_steps * (t->step_s - t->sync_s);
  GradStats g = Grad(batch, epoch);
  double scale = batch / b0_;
  double denom = g.var / scale + g.sqr;
  double gain = denom > 0 ? (g.var + g.sqr) / denom : 1.0;
  return gain / t_iter;
}

BatchConfig AppTrace::BestBatch(const NodeCounts& placement, int epoch, double* rate) const {
  int replicas = 0;
  for (int c : placement) replicas += c;
  BatchConfig best;
  double best_rate = 0;
  const double lo = std::max<double>(b0_, static_cast<double>(bmin_) * replicas);
  const double hi = bmax_total_;
  constexpr int kCandidates = 50;
  for (int k = 0; k < kCandidates; ++k) {
    double total = (k == kCandidates - 1)
                       ? hi
                       : lo * std::pow(hi / lo, static_cast<double>(k) / (kCandidates - 1));
    double local = total / replicas;
    BatchConfig c;
    c.accum_steps = static_cast<int>(std::ceil(local / bmax_ - kEps)) - 1;
    if (replicas == 1 && local > b0_ + kEps) c.accum_steps = std::max(c.accum_steps, 1);
    c.atomic_bsz = static_cast<int>(std::ceil(local / (c.accum_steps + 1) - kEps));
    int count = replicas * (c.accum_steps + 1);
    c.atomic_bsz =
        std::min(c.atomic_bsz, static_cast<int>(static_cast<double>(bmax_total_) / count));
    if (c.atomic_bsz < bmin_ || c.atomic_bsz > bmax_) continue;
    double r = ProgressRate(placement, c, epoch);
    if (r > best_rate) {
      best_rate = r;
      best = c;
    }
  }
  if (rate != nullptr) *rate = best_rate;
  return best;
}

}  // namespace weft::sim
