#include "scheduler/learning_curve.h"

#include <cmath>
#include <set>

namespace weft::scheduler {
namespace {

constexpr double kMinExponent = 0.02;
constexpr double kMaxExponent = 3.0;

// The least-squares a and b for exponent c, and the sum of squared residuals.
double FitLinear(const std::vector<std::pair<double, double>>& points, double c,
                 InversePowerLaw* fit) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [samples, metric] : points) {
    const double x = std::pow(samples, -c);
    n += 1;
    sx += x;
    sy += metric;
    sxx += x * x;
    sxy += x * metric;
  }
  const double det = n * sxx - sx * sx;
  if (!(std::abs(det) > 1e-300)) return INFINITY;
  const double slope = (n * sxy - sx * sy) / det;  // metric = a + slope · x
  fit->a = (sy - slope * sx) / n;
  fit->b = -slope;
  fit->c = c;
  double sse = 0;
  for (const auto& [samples, metric] : points) {
    const double r = metric - fit->At(samples);
    sse += r * r;
  }
  return sse;
}

}  // namespace

double InversePowerLaw::At(double samples) const {
  return a - b * std::pow(std::max(samples, 1e-12), -c);
}

std::optional<double> InversePowerLaw::SamplesToReach(double target) const {
  // a − b·s^(−c) = target  <=>  s = (b / (a − target))^(1/c), which needs b and a − target of
  // the same sign (the target short of the asymptote, on the curve's side of it).
  const double gap = a - target;
  if (b == 0 || gap == 0 || (gap > 0) != (b > 0)) return std::nullopt;
  const double s = std::pow(b / gap, 1.0 / c);
  if (!std::isfinite(s)) return std::nullopt;
  return s;
}

std::optional<InversePowerLaw> FitInversePowerLaw(
    const std::vector<std::pair<double, double>>& points) {
  std::set<double> distinct;
  std::vector<std::pair<double, double>> usable;
  for (const auto& p : points) {
    if (!(p.first > 0) || !std::isfinite(p.first) || !std::isfinite(p.second)) continue;
    distinct.insert(p.first);
    usable.push_back(p);
  }
  if (distinct.size() < 3) return std::nullopt;
  // A coarse grid in log c finds the basin; golden-section search refines it.
  InversePowerLaw fit;
  double best_c = kMinExponent, best = INFINITY;
  constexpr int kGrid = 60;
  for (int i = 0; i <= kGrid; ++i) {
    const double c = kMinExponent * std::pow(kMaxExponent / kMinExponent, double(i) / kGrid);
    const double sse = FitLinear(usable, c, &fit);
    if (sse < best) {
      best = sse;
      best_c = c;
    }
  }
  const double step = std::pow(kMaxExponent / kMinExponent, 1.0 / kGrid);
  double lo = std::max(kMinExponent, best_c / step), hi = std::min(kMaxExponent, best_c * step);
  const double phi = (std::sqrt(5.0) - 1) / 2;
  for (int i = 0; i < 60; ++i) {
    const double m1 = hi - phi * (hi - lo), m2 = lo + phi * (hi - lo);
    if (FitLinear(usable, m1, &fit) < FitLinear(usable, m2, &fit)) {
      hi = m2;
    } else {
      lo = m1;
    }
  }
  if (!std::isfinite(FitLinear(usable, (lo + hi) / 2, &fit))) return std::nullopt;
  return fit;
}

}  // namespace weft::scheduler
