#include "ps/update.h"

#include <cmath>
#include <cstring>

// The applier's loops run at memory speed only when they are vectorised as wide as the machine
// allows; gcc builds an AVX2 and a baseline copy of each and picks one at load time (ifunc).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WEFT_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define WEFT_VECTOR_CLONES
#endif

namespace weft::ps {
namespace {

WEFT_VECTOR_CLONES void Sgd(const OptimizerConfig& c, uint64_t step, const float* __restrict grad,
                            float* __restrict params, float* __restrict momentum, int64_t n) {
  const float lr = static_cast<float>(c.learning_rate);
  const float wd = static_cast<float>(c.weight_decay);
  if (c.momentum == 0) {
    for (int64_t i = 0; i < n; ++i) params[i] -= lr * (grad[i] + wd * params[i]);
    return;
  }
  const float mu = static_cast<float>(c.momentum);
  if (step == 1) {
    for (int64_t i = 0; i < n; ++i) {
      float d = grad[i] + wd * params[i];
      momentum[i] = d;
      params[i] -= lr * d;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float m = mu * momentum[i] + (grad[i] + wd * params[i]);
    momentum[i] = m;
    params[i] -= lr * m;
  }
}

}  // namespace

WEFT_VECTOR_CLONES void AdamUpdate(const OptimizerConfig& c, uint64_t step,
                                   const float* __restrict grad, float* __restrict params,
                                   float* __restrict exp_avg, float* __restrict exp_avg_sq,
                                   int64_t n) {
  // 1 − β in double, then rounded: 1 − 0.999f in float is 1.3e-5 off 0.001, a bias in every v.
  const float one_minus_b1 = static_cast<float>(1 - c.beta1);
  const float one_minus_b2 = static_cast<float>(1 - c.beta2);
  const float b2 = static_cast<float>(c.beta2);
  const float wd = static_cast<float>(c.weight_decay);
  const float eps = static_cast<float>(c.eps);
  const double bias1 = 1 - std::pow(c.beta1, static_cast<double>(step));
  const double bias2 = 1 - std::pow(c.beta2, static_cast<double>(step));
  const float step_size = static_cast<float>(c.learning_rate / bias1);
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  float* __restrict m = exp_avg;
  float* __restrict v = exp_avg_sq;
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] + wd * params[i];
    m[i] += (g - m[i]) * one_minus_b1;  // torch: exp_avg.lerp_(grad, 1 - beta1)
    v[i] = b2 * v[i] + one_minus_b2 * g * g;
    params[i] -= step_size * m[i] / (std::sqrt(v[i]) / bias2_sqrt + eps);
  }
}

namespace {

// 1 when `x` is NaN or infinite, i.e. its exponent bits are all ones, else 0. OR-ing these over
// integer compares vectorises where a branch per element would not.
inline uint32_t NonFinite(float x) {
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<uint32_t>((bits & kExponent) == kExponent);
}

}  // namespace

WEFT_VECTOR_CLONES void AddInto(float* __restrict sum, const float* __restrict grad, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] += grad[i];
}

WEFT_VECTOR_CLONES void Scale(float* sum, float factor, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] *= factor;
}

void ApplyUpdate(const OptimizerConfig& config, uint64_t step, const float* grad, float* params,
                 float* state, int64_t n) {
  if (config.kind == OptimizerKind::kAdam) {
    AdamUpdate(config, step, grad, params, state, state + n, n);
  } else {
    Sgd(config, step, grad, params, state, n);
  }
}

WEFT_VECTOR_CLONES bool CopyAndCheckFinite(float* __restrict dst, const float* __restrict src,
                                           int64_t n) {
  // The check costs the copy no extra pass over memory.
  uint32_t non_finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    non_finite |= NonFinite(src[i]);
    dst[i] = src[i];
  }
  return non_finite == 0;
}

WEFT_VECTOR_CLONES bool AllFinite(const float* __restrict x, int64_t n) {
  uint32_t non_finite = 0;
  for (int64_t i = 0; i < n; ++i) non_finite |= NonFinite(x[i]);
  return non_finite == 0;
}

}  // namespace weft::ps
