#include "train/fused_adam.h"

#include <ATen/Parallel.h>

#include "ps/update.h"

namespace weft::train {
namespace {

// Floats per chunk of a parameter split over threads: below this, one thread updates it.
constexpr int64_t kGrain = int64_t{1} << 15;

bool DenseFloat(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat &&
         t.layout() == torch::kStrided && t.is_contiguous();
}

std::string StateKey(const torch::Tensor& p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}

}  // namespace

bool FusedAdam::Fusable() {
  for (const torch::optim::OptimizerParamGroup& group : param_groups()) {
    if (static_cast<const torch::optim::AdamOptions&>(group.options()).amsgrad()) return false;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (!DenseFloat(p) || !DenseFloat(p.grad()) || p.grad().sizes() != p.sizes()) return false;
      auto it = state_.find(StateKey(p));
      if (it == state_.end()) continue;
      const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
      if (!DenseFloat(s.exp_avg()) || !DenseFloat(s.exp_avg_sq()) ||
          s.exp_avg().numel() != p.numel() || s.exp_avg_sq().numel() != p.numel()) {
        return false;
      }
    }
  }
  return true;
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  if (!Fusable()) return torch::optim::Adam::step(std::move(closure));
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (torch::optim::OptimizerParamGroup& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    ps::OptimizerConfig config;
    config.kind = ps::OptimizerKind::kAdam;
    config.learning_rate = options.lr();
    config.weight_decay = options.weight_decay();
    config.beta1 = std::get<0>(options.betas());
    config.beta2 = std::get<1>(options.betas());
    config.eps = options.eps();
    for (torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      std::unique_ptr<torch::optim::OptimizerParamState>& slot = state_[StateKey(p)];
      if (slot == nullptr) {  // as torch::optim::Adam starts a parameter's state
        auto fresh = std::make_unique<torch::optim::AdamParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& state = static_cast<torch::optim::AdamParamState&>(*slot);
      state.step(state.step() + 1);
      const float* grad = p.grad().data_ptr<float>();
      float* params = p.data_ptr<float>();
      float* exp_avg = state.exp_avg().data_ptr<float>();
      float* exp_avg_sq = state.exp_avg_sq().data_ptr<float>();
      const auto step = static_cast<uint64_t>(state.step());
      at::parallel_for(0, p.numel(), kGrain, [&](int64_t begin, int64_t end) {
        ps::AdamUpdate(config, step, grad + begin, params + begin, exp_avg + begin,
                       exp_avg_sq + begin, end - begin);
      });
    }
  }
  return loss;
}

}  // namespace weft::train
