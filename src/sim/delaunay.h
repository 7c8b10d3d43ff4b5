// Piecewise-linear interpolation over a Delaunay tetrahedralisation of scattered 3-D points,
// computed by Qhull (Barber et al., "The Quickhull Algorithm for Convex Hulls", TOMS 1996) with
// the options SciPy's LinearNDInterpolator uses ("d Qbb Qc Qz Q12 Qt"), so that weft-sim
// interpolates step times on the same simplices as the Pollux OSDI'21 artifact.
#pragma once

#include <array>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::sim {

class Delaunay3 {
 public:
  using Point = std::array<double, 3>;

  // Tetrahedralises `points` (in this order: Qhull's result depends on it) carrying `values`
  // (values[i] has `width` numbers for points[i]). InvalidArgument for fewer than 4 points or
  // mismatched sizes; Internal if Qhull fails.
  static absl::StatusOr<Delaunay3> Build(std::vector<Point> points, std::vector<double> values,
                                         int width);

  // Barycentric-linear interpolation at `q` into `out` (width numbers). False if `q` lies
  // outside the convex hull of the points (SciPy returns NaN there).
  bool Interpolate(const Point& q, double* out) const;

  size_t num_simplices() const { return simplices_.size(); }

 private:
  struct Simplex {
    std::array<int, 4> v;
    // Inverse of the 3x3 matrix [p0-p3, p1-p3, p2-p3], row-major, for barycentric coordinates.
    std::array<double, 9> inv;
    std::array<double, 3> lo, hi;  // bounding box, to skip far simplices quickly
  };
  std::vector<Point> points_;
  std::vector<double> values_;
  int width_ = 0;
  std::vector<Simplex> simplices_;
};

}  // namespace weft::sim
