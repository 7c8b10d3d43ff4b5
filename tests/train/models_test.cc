#include "train/models.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "job/layout.h"
#include "train/allocator.h"
#include "train/torchscript_fixture.h"

namespace weft::train {
namespace {

struct Grads {
  torch::Tensor y, dx, dw, db;
};

// Forward and backward of one dense layer on `kernel`; the layer and input are the same on
// every call (fixed seed).
Grads RunDense(DenseKernel kernel, std::vector<int64_t> x_shape, int64_t out) {
  torch::manual_seed(7);
  int64_t in = 1;
  for (size_t i = 1; i < x_shape.size(); ++i) in *= x_shape[i];
  torch::nn::Linear layer(in, out);
  torch::Tensor x = torch::randn(x_shape).requires_grad_(true);
  torch::Tensor y = Dense(layer, x, kernel);
  // A loss that weighs every output differently, so a transposed result could not pass.
  (y * torch::arange(y.numel()).view_as(y).to(torch::kFloat32).cos()).sum().backward();
  return {y.detach(), x.grad(), layer->weight.grad(), layer->bias.grad()};
}

void ExpectSame(const Grads& a, const Grads& b) {
  ASSERT_EQ(a.y.sizes(), b.y.sizes());
  EXPECT_TRUE(torch::allclose(a.y, b.y, 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(a.dx, b.dx, 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(a.dw, b.dw, 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(a.db, b.db, 1e-4, 1e-4));
}

TEST(DenseTest, OneDnnAndBlasAgreeOnFlatInput) {
  Grads blas = RunDense(DenseKernel::kBlas, {16, 784}, 256);
  Grads onednn = RunDense(DenseKernel::kOneDnn, {16, 784}, 256);
  EXPECT_EQ(blas.y.sizes(), (std::vector<int64_t>{16, 256}));
  ExpectSame(blas, onednn);
}

TEST(DenseTest, OneDnnAndBlasAgreeOnFeatureMaps) {
  // The CNN's fc1: [N, 64, 7, 7] flattened in (channel, row, column) order.
  Grads blas = RunDense(DenseKernel::kBlas, {8, 64, 7, 7}, 128);
  Grads onednn = RunDense(DenseKernel::kOneDnn, {8, 64, 7, 7}, 128);
  EXPECT_EQ(onednn.y.sizes(), (std::vector<int64_t>{8, 128}));
  EXPECT_EQ(onednn.dx.sizes(), (std::vector<int64_t>{8, 64, 7, 7}));
  EXPECT_EQ(onednn.dw.sizes(), (std::vector<int64_t>{128, 3136}));
  ExpectSame(blas, onednn);
}

TEST(DenseTest, OneSampleBatchWorks) {
  ExpectSame(RunDense(DenseKernel::kBlas, {1, 128}, 10),
             RunDense(DenseKernel::kOneDnn, {1, 128}, 10));
}

TEST(DenseTest, EnvironmentSelectsTheKernel) {
  unsetenv("WEFT_LEARNER_DENSE");
  EXPECT_EQ(DenseKernelFromEnvironment(), DenseKernel::kOneDnn);
  setenv("WEFT_LEARNER_DENSE", "blas", 1);
  EXPECT_EQ(DenseKernelFromEnvironment(), DenseKernel::kBlas);
  unsetenv("WEFT_LEARNER_DENSE");
}

TEST(ModelsTest, BothKernelsGiveTheSameCnnWithTheSameParameterNames) {
  torch::manual_seed(3);
  auto onednn = std::make_shared<CnnImpl>(DenseKernel::kOneDnn);
  torch::manual_seed(3);
  auto blas = std::make_shared<CnnImpl>(DenseKernel::kBlas);
  auto a = onednn->named_parameters();
  auto b = blas->named_parameters();
  ASSERT_EQ(a.keys(), b.keys());
  EXPECT_EQ(a["fc1.weight"].sizes(), (std::vector<int64_t>{128, 3136}));
  torch::Tensor x = torch::randn({4, 1, 28, 28});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(onednn->forward(x), blas->forward(x), 1e-4, 1e-4));
}

TEST(ModelsTest, TheManifestCheckCountsExactlyTheParametersTheLearnerBuilds) {
  // job/job_spec.cc counts parameters without libtorch, to check memory_mb at submission.
  for (const ModelSpec& spec : {ModelSpec{"cnn", {}, ""}, ModelSpec{"mlp", {256, 128}, ""},
                                ModelSpec{"mlp", {7}, ""}, ModelSpec{"mlp", {300, 1, 40, 9}, ""}}) {
    auto model = BuildModel(spec);
    ASSERT_TRUE(model.ok()) << model.status();
    int64_t n = 0;
    for (const auto& p : (*model)->parameters()) n += p.numel();
    EXPECT_EQ(ModelParameters(spec), n) << spec.architecture << " " << spec.hidden_units.size();
  }
}

TEST(ModelsTest, ATenantsTorchScriptModelTrainsThroughTheSameTensorsAndSavesAsTorchScript) {
  char tmpl[] = "/tmp/weft-torchscript-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  testing::MakeTorchScriptMlp().save(TorchScriptPath(dir));
  ModelSpec spec{"torchscript", {}, "net.pt"};
  auto built = BuildModel(spec, dir);
  ASSERT_TRUE(built.ok()) << built.status();
  std::shared_ptr<ClassifierImpl> model = *built;
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  EXPECT_EQ(n, 64 * 784 + 64 + 10 * 64 + 10);
  // One optimizer step on the wrapper moves the TorchScript module's own parameters.
  auto* own = dynamic_cast<TorchScriptImpl*>(model.get());
  ASSERT_NE(own, nullptr);
  torch::Tensor x = torch::randn({16, 1, 28, 28});
  torch::Tensor before = own->Logits(x);
  torch::optim::SGD sgd(model->parameters(), 0.1);
  model->train();
  torch::nll_loss(model->forward(x), torch::randint(0, 10, {16})).backward();
  sgd.step();
  torch::Tensor after = own->Logits(x);
  EXPECT_FALSE(torch::allclose(before, after));
  // eval mode is deterministic (dropout off); forward gives log-probabilities.
  model->eval();
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::allclose(model->forward(x), model->forward(x)));
    EXPECT_TRUE(torch::allclose(model->forward(x).exp().sum(1), torch::ones({16}), 1e-5, 1e-5));
  }
  // Saved, it is TorchScript again, with the trained parameters: the same logits once loaded.
  std::ostringstream bytes;
  own->Save(bytes);
  std::istringstream in(bytes.str());
  torch::jit::Module loaded = torch::jit::load(in);
  loaded.eval();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(loaded.forward({x}).toTensor(), after, 1e-5, 1e-5));

  // Refused, naming the field: a module with the wrong number of classes, and a file that is not
  // TorchScript.
  testing::MakeTorchScriptMlp(64, 5).save(TorchScriptPath(dir));
  auto wrong = BuildModel(spec, dir);
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(wrong.status()));
  EXPECT_THAT(std::string(wrong.status().message()), ::testing::HasSubstr("[2, 10]"));
  std::ofstream(TorchScriptPath(dir)) << "not a model";
  auto garbage = BuildModel(spec, dir);
  ASSERT_FALSE(garbage.ok());
  EXPECT_THAT(std::string(garbage.status().message()),
              ::testing::StartsWith("model.torchscript: "));
  std::filesystem::remove_all(dir);
}

TEST(AllocatorTest, KeepsFreedTensorsInTheProcessUnlessAskedNotTo) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator replaces glibc's malloc, so mallopt has no effect";
#endif
  setenv("WEFT_LEARNER_MALLOC", "default", 1);
  EXPECT_NE(TuneAllocatorForTraining().find("glibc's defaults"), std::string::npos);
  unsetenv("WEFT_LEARNER_MALLOC");
  std::string line = TuneAllocatorForTraining();
  EXPECT_NE(line.find("mmap threshold 32 MiB"), std::string::npos) << line;
  EXPECT_NE(line.find("trim threshold 256 MiB"), std::string::npos) << line;
  // A 4 MiB block, above glibc's initial 128 KiB threshold, now comes from the heap: freeing
  // it does not unmap it, so mallinfo2 counts it in the arena, not in mmapped memory.
  const size_t before = mallinfo2().hblkhd;
  void* p = malloc(4 << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(mallinfo2().hblkhd, before);
  free(p);
}

}  // namespace
}  // namespace weft::train
