// The inverse-power-law fit of learning curves: it recovers the curve it was sampled from, with
// and without noise, estimates the samples to a target, and refuses what it cannot fit.
#include "scheduler/learning_curve.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

std::vector<std::pair<double, double>> Sample(const InversePowerLaw& curve, double from, double to,
                                              int n, double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> jitter(0, noise);
  std::vector<std::pair<double, double>> points;
  for (int i = 0; i < n; ++i) {
    const double s = from + (to - from) * i / (n - 1);
    points.push_back({s, curve.At(s) + (noise > 0 ? jitter(rng) : 0)});
  }
  return points;
}

TEST(LearningCurveTest, RecoversTheParametersOfASyntheticCurve) {
  const InversePowerLaw truth{0.92, 3.0, 0.45};
  auto fit = FitInversePowerLaw(Sample(truth, 2560, 300000, 40, 0, 1));
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->a, truth.a, 1e-4);
  EXPECT_NEAR(fit->b, truth.b, 1e-2);
  EXPECT_NEAR(fit->c, truth.c, 1e-3);
  // A falling curve (a loss) too.
  const InversePowerLaw loss{0.25, -4.0, 0.6};
  auto lfit = FitInversePowerLaw(Sample(loss, 1000, 100000, 30, 0, 2));
  ASSERT_TRUE(lfit.has_value());
  EXPECT_NEAR(lfit->c, loss.c, 1e-3);
  EXPECT_NEAR(*lfit->SamplesToReach(0.3), *loss.SamplesToReach(0.3), 1.0);
}

// Evaluations on 1,000 test images are noisy (here ±0.3 points of accuracy, one standard
// deviation). Fitted to 40 evaluations up to 20,000 samples, the curve predicts when a target is
// reached at 1.4 times that (an extrapolation); over 100 noise draws, nearly all predictions fall
// within 25 % and their median within 5 %. (A target nearer the asymptote is harder: at 2 times
// the range about 10 % of draws miss by more than 25 % — docs/design.md gives the figures.)
TEST(LearningCurveTest, FromTheFirstPartOfANoisyCurvePredictsWhenATargetIsReached) {
  const InversePowerLaw truth{0.92, 3.0, 0.45};
  const double target = 0.89;
  const double when = *truth.SamplesToReach(target);  // about 27,800 samples
  std::vector<double> ratios;
  for (unsigned seed = 0; seed < 100; ++seed) {
    auto fit = FitInversePowerLaw(Sample(truth, 1000, 20000, 40, 0.003, seed));
    ASSERT_TRUE(fit.has_value());
    auto predicted = fit->SamplesToReach(target);
    ratios.push_back(predicted ? *predicted / when : INFINITY);
  }
  std::sort(ratios.begin(), ratios.end());
  const auto within =
      std::count_if(ratios.begin(), ratios.end(), [](double r) { return std::abs(r - 1) <= 0.25; });
  EXPECT_GE(within, 90);
  EXPECT_NEAR(ratios[50], 1.0, 0.05);
  // Inside the range of the data the fit interpolates: every draw within 10 %.
  for (unsigned seed = 0; seed < 20; ++seed) {
    auto fit = FitInversePowerLaw(Sample(truth, 1000, 20000, 40, 0.003, seed));
    ASSERT_TRUE(fit.has_value());
    EXPECT_NEAR(*fit->SamplesToReach(0.88) / *truth.SamplesToReach(0.88), 1.0, 0.1) << seed;
  }
}

TEST(LearningCurveTest, UnreachableTargetsAndTooFewPointsAreNotGuessed) {
  const InversePowerLaw curve{0.9, 2.0, 0.5};
  EXPECT_FALSE(curve.SamplesToReach(0.9).has_value());   // the asymptote
  EXPECT_FALSE(curve.SamplesToReach(0.95).has_value());  // beyond it
  EXPECT_TRUE(curve.SamplesToReach(0.5).has_value());
  EXPECT_FALSE(FitInversePowerLaw({{100, 0.5}, {200, 0.6}}).has_value());
  EXPECT_FALSE(FitInversePowerLaw({{100, 0.5}, {100, 0.6}, {0, 0.7}, {-5, 0.8}}).has_value());
  EXPECT_TRUE(FitInversePowerLaw({{100, 0.5}, {200, 0.6}, {400, 0.65}}).has_value());
}

}  // namespace
}  // namespace weft::scheduler
