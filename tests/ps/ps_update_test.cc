// The applier's optimizer step against libtorch's own torch::optim on the same numbers: a `ps`
// job must follow the rule an `allreduce` job of the same manifest follows.
#include <torch/torch.h>

#include <vector>

#include "gtest/gtest.h"
#include "ps/update.h"

namespace weft::ps {
namespace {

constexpr int64_t kN = 1000;

// Runs 5 steps of `torch_optimizer` and of ApplyUpdate(config) from the same parameters and
// gradients, and expects the same parameters up to float rounding.
void ExpectSameAsTorch(
    const OptimizerConfig& config,
    const std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>&
        torch_optimizer) {
  torch::manual_seed(7);
  torch::Tensor reference = torch::randn({kN}).set_requires_grad(true);
  std::vector<float> params(reference.data_ptr<float>(), reference.data_ptr<float>() + kN);
  std::vector<float> state(static_cast<size_t>(kN * StateFloatsPerParam(config)), 0.0f);
  auto optimizer = torch_optimizer({reference});
  for (uint64_t step = 1; step <= 5; ++step) {
    torch::Tensor grad = torch::randn({kN}) * 0.5;
    reference.mutable_grad() = grad.clone();
    optimizer->step();
    ApplyUpdate(config, step, grad.data_ptr<float>(), params.data(), state.data(), kN);
  }
  torch::Tensor ours = torch::from_blob(params.data(), {kN}, torch::kFloat);
  EXPECT_TRUE(torch::allclose(ours, reference.detach(), /*rtol=*/1e-5, /*atol=*/1e-6))
      << "largest difference " << (ours - reference.detach()).abs().max().item<float>();
  EXPECT_FALSE(torch::equal(ours, torch::zeros({kN})));
}

TEST(PsUpdateTest, SgdWithMomentumAndWeightDecayIsTorchsSgd) {
  OptimizerConfig config;
  config.kind = OptimizerKind::kSgd;
  config.learning_rate = 0.1;
  config.momentum = 0.9;
  config.weight_decay = 0.01;
  ExpectSameAsTorch(config, [](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(
        p, torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  });
}

TEST(PsUpdateTest, PlainSgdIsTorchsSgd) {
  OptimizerConfig config;
  config.learning_rate = 0.05;
  ExpectSameAsTorch(config, [](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.05));
  });
}

TEST(PsUpdateTest, AdamWithWeightDecayIsTorchsAdam) {
  OptimizerConfig config;
  config.kind = OptimizerKind::kAdam;
  config.learning_rate = 0.01;
  config.weight_decay = 0.01;
  ExpectSameAsTorch(config, [](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(p,
                                                torch::optim::AdamOptions(0.01).weight_decay(0.01));
  });
}

TEST(PsUpdateTest, CopyAndCheckFiniteCopiesAndFindsNanAndInfinityAnywhere) {
  std::vector<float> grad(37), copy(37, 0.0f);
  for (int i = 0; i < 37; ++i) grad[i] = 0.25f * i - 3;
  EXPECT_TRUE(CopyAndCheckFinite(copy.data(), grad.data(), 37));
  EXPECT_EQ(copy, grad);
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    for (int at : {0, 17, 36}) {
      std::vector<float> g = grad;
      g[at] = bad;
      EXPECT_FALSE(CopyAndCheckFinite(copy.data(), g.data(), 37)) << bad << " at " << at;
      EXPECT_FALSE(AllFinite(g.data(), 37)) << bad << " at " << at;
      EXPECT_TRUE(AllFinite(g.data(), at)) << "the values before it are finite";
    }
  }
  EXPECT_TRUE(AllFinite(grad.data(), 37));
  EXPECT_TRUE(AllFinite(grad.data(), 0));
}

}  // namespace
}  // namespace weft::ps
