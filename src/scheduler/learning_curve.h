// A job's learning curve — its test metric against the samples it has trained — fitted so that a
// policy can estimate how many more samples a target needs. Pure math, no I/O.
#pragma once

#include <optional>
#include <utility>
#include <vector>

namespace weft::scheduler {

// metric(samples) = a − b · samples^(−c), the inverse power law of learning curves (Hestness et
// al., "Deep Learning Scaling is Predictable, Empirically", 2017; Domhan et al., IJCAI'15, use it
// among their curve families). For a rising metric (accuracy) b > 0 and `a` is the level it
// approaches; a falling one (a loss) is fitted with b < 0. Optimus's loss model
// 1 / (β0·k + β1) + β2 (Peng et al., EuroSys'18) behaves as the special case c = 1 for large k;
// the free exponent fits accuracy curves, which flatten more slowly.
struct InversePowerLaw {
  double a = 0;
  double b = 0;
  double c = 1;

  double At(double samples) const;
  // The samples at which the curve reaches `target` (from below when b > 0, from above when b < 0);
  // nullopt when it never does (the target is at or beyond the asymptote `a`).
  std::optional<double> SamplesToReach(double target) const;
};

// Least-squares fit of `points` (samples > 0, metric): for each exponent c, a and b follow in
// closed form (the model is linear in them); c is searched over [0.02, 3] on a grid and refined by
// golden-section search. nullopt with fewer than 3 points of distinct positive samples.
std::optional<InversePowerLaw> FitInversePowerLaw(
    const std::vector<std::pair<double, double>>& points);

}  // namespace weft::scheduler
