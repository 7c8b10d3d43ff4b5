#include "train/fused_adam.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

namespace weft::train {
namespace {

// Parameters shaped like a small MLP's (a weight, its bias, a second weight), one larger than a
// thread's chunk so that the update is split.
std::vector<torch::Tensor> MakeParameters() {
  torch::manual_seed(7);
  return {torch::randn({300, 200}).requires_grad_(), torch::randn({300}).requires_grad_(),
          torch::randn({10, 300}).requires_grad_()};
}

std::vector<torch::Tensor> Copy(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : ps) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

// Gives every parameter (but `skip`) the gradient `seed` draws: the same for both optimizers.
void SetGradients(std::vector<torch::Tensor>& ps, int seed, size_t skip = SIZE_MAX) {
  torch::manual_seed(seed);
  for (size_t i = 0; i < ps.size(); ++i) {
    torch::Tensor g = torch::randn(ps[i].sizes());
    if (i != skip) ps[i].mutable_grad() = g;
  }
}

void ExpectClose(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, 1e-6))
        << "parameter " << i << ": largest difference " << (a[i] - b[i]).abs().max().item<double>();
  }
}

// Steps both optimizers `steps` times on the same gradients.
void Train(torch::optim::Optimizer& a, std::vector<torch::Tensor>& pa, torch::optim::Optimizer& b,
           std::vector<torch::Tensor>& pb, int steps, int first_seed = 0) {
  for (int s = 0; s < steps; ++s) {
    SetGradients(pa, first_seed + s);
    SetGradients(pb, first_seed + s);
    a.step();
    b.step();
  }
}

class FusedAdamTest : public ::testing::TestWithParam<double> {};  // weight decay

TEST_P(FusedAdamTest, FollowsTorchsAdamStepForStepUpToFloatRounding) {
  torch::set_num_threads(2);
  auto fused_params = MakeParameters();
  auto torch_params = Copy(fused_params);
  auto options = torch::optim::AdamOptions(3e-3).weight_decay(GetParam());
  FusedAdam fused(fused_params, options);
  torch::optim::Adam reference(torch_params, options);
  Train(fused, fused_params, reference, torch_params, 50);
  ExpectClose(fused_params, torch_params);
  // The moments and the step count are kept as torch::optim::Adam keeps them.
  for (size_t i = 0; i < fused_params.size(); ++i) {
    const std::string key = c10::guts::to_string(fused_params[i].unsafeGetTensorImpl());
    const std::string ref_key = c10::guts::to_string(torch_params[i].unsafeGetTensorImpl());
    const auto& s = static_cast<torch::optim::AdamParamState&>(*fused.state().at(key));
    const auto& r = static_cast<torch::optim::AdamParamState&>(*reference.state().at(ref_key));
    EXPECT_EQ(s.step(), 50);
    EXPECT_EQ(s.step(), r.step());
    EXPECT_TRUE(torch::allclose(s.exp_avg(), r.exp_avg(), 1e-5, 1e-6))
        << "exp_avg, largest difference " << (s.exp_avg() - r.exp_avg()).abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(s.exp_avg_sq(), r.exp_avg_sq(), 1e-5, 1e-7))
        << "exp_avg_sq, largest difference "
        << (s.exp_avg_sq() - r.exp_avg_sq()).abs().max().item<double>();
  }
  // And it does move the parameters.
  EXPECT_FALSE(torch::allclose(fused_params[0], MakeParameters()[0]));
  torch::set_num_threads(1);
}

INSTANTIATE_TEST_SUITE_P(WeightDecay, FusedAdamTest, ::testing::Values(0.0, 1e-2));

TEST(FusedAdamCheckpointTest, ItsStateSavesAndLoadsAsTorchsAdamsBothWays) {
  auto fused_params = MakeParameters();
  auto torch_params = Copy(fused_params);
  FusedAdam fused(fused_params, torch::optim::AdamOptions(1e-3));
  torch::optim::Adam reference(torch_params, torch::optim::AdamOptions(1e-3));
  Train(fused, fused_params, reference, torch_params, 5);
  // A checkpoint of one, loaded into the other kind, goes on as the other would have.
  std::stringstream from_fused, from_torch;
  {
    torch::serialize::OutputArchive a, b;
    fused.save(a);
    reference.save(b);
    a.save_to(from_fused);
    b.save_to(from_torch);
  }
  auto p1 = Copy(fused_params), p2 = Copy(torch_params);
  torch::optim::Adam torch_resumed(p1, torch::optim::AdamOptions(1e-3));
  FusedAdam fused_resumed(p2, torch::optim::AdamOptions(1e-3));
  {
    torch::serialize::InputArchive a, b;
    a.load_from(from_fused);
    b.load_from(from_torch);
    torch_resumed.load(a);
    fused_resumed.load(b);
  }
  Train(torch_resumed, p1, fused_resumed, p2, 5, 100);
  Train(fused, fused_params, reference, torch_params, 5, 100);
  ExpectClose(p1, fused_params);
  ExpectClose(p2, torch_params);
}

TEST(FusedAdamEdgeTest, AParameterWithoutAGradientIsLeftAloneAndGetsNoState) {
  auto params = MakeParameters();
  const torch::Tensor before = params[1].detach().clone();
  FusedAdam fused(params, torch::optim::AdamOptions(1e-2));
  SetGradients(params, 1, /*skip=*/1);
  fused.step();
  EXPECT_TRUE(torch::equal(params[1], before));
  EXPECT_EQ(fused.state().count(c10::guts::to_string(params[1].unsafeGetTensorImpl())), 0u);
  EXPECT_EQ(fused.state().size(), 2u);
}

TEST(FusedAdamEdgeTest, WhatItCannotFuseIsTorchsOwnStep) {
  // amsgrad, and a parameter that is not contiguous (a transposed view), each take
  // torch::optim::Adam's step, so the results are exactly its.
  for (bool amsgrad : {true, false}) {
    auto base = MakeParameters();
    std::vector<torch::Tensor> a = {amsgrad ? base[0] : base[0].detach().t().requires_grad_()};
    std::vector<torch::Tensor> b = {a[0].detach().clone().requires_grad_()};
    if (!amsgrad) b = {base[0].detach().clone().t().requires_grad_()};
    ASSERT_EQ(a[0].is_contiguous(), amsgrad);
    auto options = torch::optim::AdamOptions(1e-2).amsgrad(amsgrad);
    FusedAdam fused(a, options);
    torch::optim::Adam reference(b, options);
    Train(fused, a, reference, b, 3);
    EXPECT_TRUE(torch::equal(a[0], b[0])) << "amsgrad " << amsgrad;
  }
}

}  // namespace
}  // namespace weft::train
