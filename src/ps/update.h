// The optimizer step the parameter server's applier runs on flat float arrays, with
// torch.optim's semantics so that a `ps` job and an `allreduce` job of the same manifest follow
// the same rule: SGD (momentum, no dampening, no Nesterov, L2 weight decay) and Adam (Kingma &
// Ba, ICLR 2015, L2 weight decay, no AMSGrad).
#pragma once

#include <cstdint>

#include "ps/layout.h"

namespace weft::ps {

// Applies one update to params[n] from grad[n] (already averaged), with the optimizer state
// state[n * StateFloatsPerParam(config)] (zero before the first update). `step` is this update's
// 1-based number: it starts SGD's momentum buffer (step 1) and corrects Adam's bias.
void ApplyUpdate(const OptimizerConfig& config, uint64_t step, const float* grad, float* params,
                 float* state, int64_t n);

// Adam's update of params[n] from grad[n] with its moments exp_avg[n] and exp_avg_sq[n] held
// apart (ApplyUpdate's Adam holds them in one array): torch.optim.Adam's rule, one pass over
// memory. `step` is 1-based; config.momentum is not used.
void AdamUpdate(const OptimizerConfig& config, uint64_t step, const float* grad, float* params,
                float* exp_avg, float* exp_avg_sq, int64_t n);

// sum[i] += grad[i] for i < n (a kBsp round's gradients, added up).
void AddInto(float* sum, const float* grad, int64_t n);
// sum[i] *= factor for i < n.
void Scale(float* sum, float factor, int64_t n);

// Copies src[n] to dst[n] and returns true when every value is finite (no NaN, no infinity):
// a learner checks its gradient as it publishes it, in the same pass over memory.
bool CopyAndCheckFinite(float* dst, const float* src, int64_t n);
// True when every value of x[n] is finite (no NaN, no infinity): the check of CopyAndCheckFinite
// without the copy (a gradient a server receives, or one a learner sends over the network).
bool AllFinite(const float* x, int64_t n);

}  // namespace weft::ps
