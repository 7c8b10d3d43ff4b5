#include "sim/delaunay.h"

#include <cmath>
#include <cstdio>

extern "C" {
#include "libqhull_r/qhull_ra.h"
}

namespace weft::sim {

absl::StatusOr<Delaunay3> Delaunay3::Build(std::vector<Point> points, std::vector<double> values,
                                           int width) {
  if (points.size() < 4) return absl::InvalidArgumentError("Delaunay3 needs at least 4 points");
  if (width <= 0 || values.size() != points.size() * static_cast<size_t>(width)) {
    return absl::InvalidArgumentError("Delaunay3: values do not match points");
  }
  Delaunay3 d;
  d.points_ = std::move(points);
  d.values_ = std::move(values);
  d.width_ = width;

  std::vector<coordT> coords;
  coords.reserve(d.points_.size() * 3);
  for (const Point& p : d.points_) coords.insert(coords.end(), p.begin(), p.end());

  qhT qh_qh;
  qhT* qh = &qh_qh;
  qh_zero(qh, stderr);
  char flags[] = "qhull d Qbb Qc Qz Q12 Qt";
  int exitcode = qh_new_qhull(qh, 3, static_cast<int>(d.points_.size()), coords.data(),
                              /*ismalloc=*/False, flags, /*outfile=*/nullptr, /*errfile=*/stderr);
  if (exitcode == 0) {
    facetT* facet;
    vertexT *vertex, **vertexp;
    FORALLfacets {
      if (facet->upperdelaunay) continue;
      Simplex s;
      int k = 0;
      FOREACHvertex_(facet->vertices) {
        if (k < 4) s.v[k] = qh_pointid(qh, vertex->point);
        ++k;
      }
      if (k != 4) continue;
      d.simplices_.push_back(s);
    }
  }
  int curlong = 0, totlong = 0;
  qh_freeqhull(qh, !qh_ALL);
  qh_memfreeshort(qh, &curlong, &totlong);
  if (exitcode != 0) return absl::InternalError("Qhull failed to tetrahedralise the points");

  // Precompute barycentric transforms; drop degenerate simplices (zero volume).
  std::vector<Simplex> kept;
  for (Simplex& s : d.simplices_) {
    const Point& p3 = d.points_[s.v[3]];
    double m[9];
    for (int c = 0; c < 3; ++c) {
      const Point& pc = d.points_[s.v[c]];
      for (int r = 0; r < 3; ++r) m[r * 3 + c] = pc[r] - p3[r];
    }
    double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                 m[2] * (m[3] * m[7] - m[4] * m[6]);
    if (std::fabs(det) < 1e-300) continue;
    double inv_det = 1.0 / det;
    s.inv = {(m[4] * m[8] - m[5] * m[7]) * inv_det, (m[2] * m[7] - m[1] * m[8]) * inv_det,
             (m[1] * m[5] - m[2] * m[4]) * inv_det, (m[5] * m[6] - m[3] * m[8]) * inv_det,
             (m[0] * m[8] - m[2] * m[6]) * inv_det, (m[2] * m[3] - m[0] * m[5]) * inv_det,
             (m[3] * m[7] - m[4] * m[6]) * inv_det, (m[1] * m[6] - m[0] * m[7]) * inv_det,
             (m[0] * m[4] - m[1] * m[3]) * inv_det};
    for (int r = 0; r < 3; ++r) {
      s.lo[r] = s.hi[r] = p3[r];
      for (int c = 0; c < 3; ++c) {
        s.lo[r] = std::min(s.lo[r], d.points_[s.v[c]][r]);
        s.hi[r] = std::max(s.hi[r], d.points_[s.v[c]][r]);
      }
    }
    kept.push_back(s);
  }
  d.simplices_ = std::move(kept);
  return d;
}

bool Delaunay3::Interpolate(const Point& q, double* out) const {
  // SciPy's find_simplex accepts barycentric coordinates down to -eps (eps = 100 × DBL_EPSILON).
  constexpr double kEps = 100 * 2.220446049250313e-16;
  for (const Simplex& s : simplices_) {
    bool inside_box = true;
    for (int r = 0; r < 3 && inside_box; ++r) {
      double tol = kEps * (1 + std::fabs(s.hi[r]) + std::fabs(s.lo[r]));
      inside_box = q[r] >= s.lo[r] - tol && q[r] <= s.hi[r] + tol;
    }
    if (!inside_box) continue;
    const Point& p3 = points_[s.v[3]];
    double dx[3] = {q[0] - p3[0], q[1] - p3[1], q[2] - p3[2]};
    double c[4];
    c[3] = 1;
    for (int i = 0; i < 3; ++i) {
      c[i] = s.inv[i * 3] * dx[0] + s.inv[i * 3 + 1] * dx[1] + s.inv[i * 3 + 2] * dx[2];
      c[3] -= c[i];
    }
    if (c[0] < -kEps || c[1] < -kEps || c[2] < -kEps || c[3] < -kEps) continue;
    for (int w = 0; w < width_; ++w) {
      double v = 0;
      for (int i = 0; i < 4; ++i) v += c[i] * values_[static_cast<size_t>(s.v[i]) * width_ + w];
      out[w] = v;
    }
    return true;
  }
  return false;
}

}  // namespace weft::sim
