#include "train/models.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "job/layout.h"
#include "train/allocator.h"
#include "train/blas.h"
#include "train/torchscript_fixture.h"

namespace weft::train {
namespace {

// Forward and backward of a built-in on `kernel`; the same parameters and input on every call
// (fixed seed).
struct Pass {
  std::vector<std::string> names;
  torch::Tensor logits;
  std::vector<torch::Tensor> grads;
};

Pass RunBuiltin(const ModelSpec& spec, const LayerKernels& kernel, int64_t batch) {
  torch::manual_seed(7);
  auto module = MakeBuiltinModule(spec, kernel);
  EXPECT_TRUE(module.ok()) << module.status();
  ClassifierImpl model(*module);
  torch::Tensor x = torch::randn({batch, 1, 28, 28});
  Pass pass;
  pass.logits = model.Logits(x);
  // A loss that weighs every output differently, so a transposed result could not pass.
  torch::Tensor y = model.forward(x);
  (y * torch::arange(y.numel()).view_as(y).to(torch::kFloat32).cos()).sum().backward();
  for (const auto& p : model.named_parameters()) {
    pass.names.push_back(p.key());
    pass.grads.push_back(p.value().grad());
  }
  return pass;
}

void ExpectSame(const Pass& a, const Pass& b) {
  ASSERT_EQ(a.names, b.names);
  ASSERT_EQ(a.logits.sizes(), b.logits.sizes());
  EXPECT_TRUE(torch::allclose(a.logits, b.logits, 1e-4, 1e-4));
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_TRUE(a.grads[i].defined()) << a.names[i];
    EXPECT_TRUE(torch::allclose(a.grads[i], b.grads[i], 1e-4, 1e-4)) << a.names[i];
  }
}

TEST(BuiltinsTest, OneDnnAndBlasDenseLayersGiveTheSameCnn) {
  const ModelSpec cnn{"cnn", {}, ""};
  Pass onednn = RunBuiltin(cnn, Kernel::kOneDnn, 8);
  Pass blas = RunBuiltin(cnn, Kernel::kBlas, 8);
  EXPECT_EQ(onednn.names,
            (std::vector<std::string>{"conv1_weight", "conv1_bias", "conv2_weight", "conv2_bias",
                                      "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"}));
  EXPECT_EQ(onednn.logits.sizes(), (std::vector<int64_t>{8, 10}));
  EXPECT_EQ(onednn.grads[4].sizes(), (std::vector<int64_t>{128, 3136}));
  ExpectSame(onednn, blas);
}

TEST(BuiltinsTest, OneDnnAndBlasDenseLayersGiveTheSameMlpAlsoForOneSample) {
  const ModelSpec mlp{"mlp", {256, 128}, ""};
  ExpectSame(RunBuiltin(mlp, Kernel::kOneDnn, 16), RunBuiltin(mlp, Kernel::kBlas, 16));
  ExpectSame(RunBuiltin(mlp, Kernel::kOneDnn, 1), RunBuiltin(mlp, Kernel::kBlas, 1));
  EXPECT_FALSE(MakeBuiltinModule(ModelSpec{"resnet", {}, ""}, Kernel::kOneDnn).ok());
}

TEST(BuiltinsTest, EnvironmentForcesAKernelOrLeavesTheChoiceToTiming) {
  unsetenv("WEFT_LEARNER_DENSE");
  unsetenv("WEFT_LEARNER_KERNELS");
  EXPECT_EQ(KernelFromEnvironment(), std::nullopt);
  setenv("WEFT_LEARNER_KERNELS", "auto", 1);
  EXPECT_EQ(KernelFromEnvironment(), std::nullopt);
  setenv("WEFT_LEARNER_KERNELS", "blas", 1);
  EXPECT_EQ(KernelFromEnvironment(), Kernel::kBlas);
  setenv("WEFT_LEARNER_KERNELS", "onednn", 1);
  EXPECT_EQ(KernelFromEnvironment(), Kernel::kOneDnn);
  unsetenv("WEFT_LEARNER_KERNELS");
  setenv("WEFT_LEARNER_DENSE", "blas", 1);  // the older name
  EXPECT_EQ(KernelFromEnvironment(), Kernel::kBlas);
  unsetenv("WEFT_LEARNER_DENSE");
}

// The convolutions too give the same CNN on either kernel, and so does any mix of kernels per
// layer; ChooseKernels names every layer of the CNN and of an MLP, with a line of timings each.
TEST(BuiltinsTest, EveryMixOfKernelsGivesTheSameCnnAndTheChoiceCoversEveryLayer) {
  const ModelSpec cnn{"cnn", {}, ""};
  Pass onednn = RunBuiltin(cnn, Kernel::kOneDnn, 8);
  LayerKernels mixed(Kernel::kOneDnn);
  mixed.by_layer = {{"conv1", Kernel::kBlas}, {"fc2", Kernel::kBlas}};
  ExpectSame(onednn, RunBuiltin(cnn, mixed, 8));
  LayerKernels other(Kernel::kBlas);
  other.by_layer = {{"conv2", Kernel::kOneDnn}};
  ExpectSame(onednn, RunBuiltin(cnn, other, 8));

  std::vector<std::string> log;
  LayerKernels chosen = ChooseKernels(cnn, kImageShape, 10, 16, &log);
  EXPECT_EQ(chosen.by_layer.size(), 4u);
  for (const char* layer : {"conv1", "conv2", "fc1", "fc2"}) {
    EXPECT_EQ(chosen.by_layer.count(layer), 1u) << layer;
  }
  ASSERT_EQ(log.size(), 5u);
  EXPECT_THAT(log[0], ::testing::MatchesRegex(
                          "conv1 \\[16, 1, 28, 28\\] -> 32 maps 3x3: oneDNN [0-9.]+ ms, BLAS "
                          "[0-9.]+ ms: (onednn|blas)"));
  // The per-layer choice was timed as a whole step against all-oneDNN and all-BLAS; the result
  // is one of the three.
  EXPECT_THAT(log[4], ::testing::MatchesRegex("the whole step: per layer [0-9.]+ ms(, oneDNN "
                                              "[0-9.]+ ms)?(, BLAS [0-9.]+ ms)?: (per "
                                              "layer|oneDNN|BLAS)"));
  const bool all_onednn = std::all_of(chosen.by_layer.begin(), chosen.by_layer.end(),
                                      [](const auto& l) { return l.second == Kernel::kOneDnn; });
  const bool all_blas = std::all_of(chosen.by_layer.begin(), chosen.by_layer.end(),
                                    [](const auto& l) { return l.second == Kernel::kBlas; });
  if (absl::EndsWith(log[4], ": oneDNN")) {
    EXPECT_TRUE(all_onednn) << log[4];
  }
  if (absl::EndsWith(log[4], ": BLAS")) {
    EXPECT_TRUE(all_blas) << log[4];
  }
  LayerKernels mlp = ChooseKernels(ModelSpec{"mlp", {32, 16}, ""}, {8}, 3, 4);
  EXPECT_EQ(mlp.by_layer.size(), 3u);
  EXPECT_TRUE(ChooseKernels(ModelSpec{"torchscript", {}, "net.pt"}, {8}, 3, 4).by_layer.empty());
}

// A kernel choice timed once is kept by shape in the job's kernels.tsv: a second learner with the
// same context takes it untimed (even where timing would choose otherwise), another context times
// again, and the file holds one line per shape.
TEST(KernelCacheTest, ChoicesAreCachedByShapeAndContextAndReadBackUntimed) {
  char tmpl[] = "/tmp/weft-kernels-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = KernelCachePath(dir);
  const ModelSpec mlp{"mlp", {32, 16}, ""};
  KernelCache first = KernelCache::Load(path);
  EXPECT_EQ(first.size(), 0u) << "no file yet";
  std::vector<std::string> log;
  LayerKernels timed = ChooseKernels(mlp, {8}, 3, 4, &log, &first, "cpu A | blas B");
  ASSERT_EQ(log.size(), 4u) << "3 layers and the whole step";
  EXPECT_THAT(log[0], ::testing::HasSubstr("ms: "));
  EXPECT_EQ(first.size(), 3u);
  ASSERT_TRUE(first.Save().ok());
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  // Flip every cached choice: a reader must follow the file, not time again.
  KernelCache flipped = KernelCache::Load(path);
  ASSERT_EQ(flipped.size(), 3u);
  {
    std::ifstream in(path);
    std::string line, text;
    int i = 0;
    while (std::getline(in, line)) {
      const std::string key = line.substr(0, line.find('\t'));
      const std::string kernel = line.substr(line.find('\t') + 1);
      text += key + "\t" + (kernel == "blas" ? "onednn" : "blas") + "\n";
      ++i;
    }
    EXPECT_EQ(i, 3);
    std::ofstream(path, std::ios::trunc) << text << "junk without a tab\nkey\tsimd\n";
  }
  KernelCache second = KernelCache::Load(path);
  EXPECT_EQ(second.size(), 3u) << "malformed lines are skipped";
  log.clear();
  LayerKernels cached = ChooseKernels(mlp, {8}, 3, 4, &log, &second, "cpu A | blas B");
  ASSERT_EQ(log.size(), 3u) << "every layer cached: no whole step timed";
  for (const char* layer : {"fc1", "fc2", "fc3"}) {
    EXPECT_NE(cached.For(layer), timed.For(layer)) << layer << ": the cached (flipped) choice";
  }
  EXPECT_THAT(log[0], ::testing::MatchesRegex("fc1 \\[4, 8\\] -> 32: (onednn|blas), cached"));

  // Another CPU or BLAS is timed afresh, and saving keeps both contexts' lines.
  KernelCache other = KernelCache::Load(path);
  log.clear();
  ChooseKernels(mlp, {8}, 3, 4, &log, &other, "cpu C | blas B");
  EXPECT_THAT(log[0], ::testing::HasSubstr("ms: "));
  ASSERT_TRUE(other.Save().ok());
  EXPECT_EQ(KernelCache::Load(path).size(), 6u);

  // Keys that could not be read back are refused.
  EXPECT_FALSE(other.Put("a\tb", "blas"));
  EXPECT_FALSE(other.Put("a\nb", "blas"));
  EXPECT_FALSE(other.Put(std::string(kMaxKernelCacheKeyBytes + 1, 'k'), "blas"));
  EXPECT_FALSE(other.Put("fine", "mkl"));
  EXPECT_TRUE(other.Put("fine", "blas"));
  std::filesystem::remove_all(dir);
}

TEST(BuiltinsTest, ABuiltInSavesAsTorchScriptThatLoadsToTheSameLogits) {
  for (const ModelSpec& spec : {ModelSpec{"cnn", {}, ""}, ModelSpec{"mlp", {32}, ""}}) {
    auto built = BuildModel(spec);
    ASSERT_TRUE(built.ok()) << built.status();
    std::ostringstream bytes;
    (*built)->Save(bytes);
    std::istringstream in(bytes.str());
    torch::jit::Module loaded = torch::jit::load(in);
    loaded.eval();
    torch::Tensor x = torch::randn({4, 1, 28, 28});
    torch::NoGradGuard no_grad;
    torch::Tensor logits = loaded.forward({x}).toTensor();
    EXPECT_TRUE(torch::equal(logits, (*built)->Logits(x))) << spec.architecture;
    // forward gives log-probabilities of those logits.
    EXPECT_TRUE(torch::allclose((*built)->forward(x), torch::log_softmax(logits, 1)));
  }
}

TEST(BuiltinsTest, TheMlpTakesSamplesOfAnyShapeAndTheCnnOnlyImages) {
  auto mlp = BuildModel(ModelSpec{"mlp", {16}, ""}, "", {8}, 3);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ((*mlp)->Logits(torch::zeros({5, 8})).sizes(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ((*mlp)->named_parameters()["fc1_weight"].sizes(), (std::vector<int64_t>{16, 8}));
  auto volume = BuildModel(ModelSpec{"mlp", {16}, ""}, "", {2, 3, 3}, 4);
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ((*volume)->Logits(torch::zeros({1, 2, 3, 3})).sizes(), (std::vector<int64_t>{1, 4}));
  auto cnn = BuildModel(ModelSpec{"cnn", {}, ""}, "", {8}, 3);
  ASSERT_FALSE(cnn.ok());
  EXPECT_EQ(cnn.status().message(),
            "model.architecture: cnn takes 28×28 grey images [N, 1, 28, 28]; this data set's "
            "samples are [N, 8] (the mlp takes any)");
  // A tenant's module for images, on tabular data: refused, saying with what input.
  char tmpl[] = "/tmp/weft-torchscript-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  testing::MakeTorchScriptMlp().save(TorchScriptPath(dir));
  auto own = BuildModel(ModelSpec{"torchscript", {}, "net.pt"}, dir, {8}, 3);
  ASSERT_FALSE(own.ok());
  EXPECT_THAT(std::string(own.status().message()),
              ::testing::StartsWith("model.torchscript: forward fails on [2, 8] float32"));
  std::filesystem::remove_all(dir);
}

// The CNN as weft's learners defined it before the built-ins were TorchScript: one nn::Module
// per layer, saved as one sub-archive per layer.
struct ModuleCnn : torch::nn::Module {
  ModuleCnn() {
    register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
    register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128));
    register_module("fc2", torch::nn::Linear(128, 10));
  }
};

TEST(BuiltinsTest, CheckpointsOfBothLayoutsLoad) {
  torch::manual_seed(11);
  ModuleCnn old;
  torch::serialize::OutputArchive old_out;
  old.save(old_out);
  std::ostringstream old_bytes;
  old_out.save_to(old_bytes);
  auto model = BuildModel(ModelSpec{"cnn", {}, ""});
  ASSERT_TRUE(model.ok());
  {
    std::istringstream in(old_bytes.str());
    torch::serialize::InputArchive ar;
    ar.load_from(in);
    LoadParameters(**model, ar);
  }
  auto now = (*model)->named_parameters();
  for (const auto& p : old.named_parameters()) {
    std::string name = p.key();
    std::replace(name.begin(), name.end(), '.', '_');
    ASSERT_TRUE(now.contains(name)) << name;
    EXPECT_TRUE(torch::equal(now[name], p.value())) << name;
  }

  // Today's layout, into a fresh model: the same parameters again.
  torch::serialize::OutputArchive out;
  (*model)->save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  auto fresh = BuildModel(ModelSpec{"cnn", {}, ""});
  ASSERT_TRUE(fresh.ok());
  std::istringstream in(bytes.str());
  torch::serialize::InputArchive ar;
  ar.load_from(in);
  LoadParameters(**fresh, ar);
  torch::Tensor x = torch::randn({2, 1, 28, 28});
  EXPECT_TRUE(torch::equal((*fresh)->Logits(x), (*model)->Logits(x)));

  // Another architecture's checkpoint is refused, not half loaded.
  auto mlp = BuildModel(ModelSpec{"mlp", {32}, ""});
  ASSERT_TRUE(mlp.ok());
  std::istringstream again(bytes.str());
  torch::serialize::InputArchive cnn_ar;
  cnn_ar.load_from(again);
  EXPECT_THROW(LoadParameters(**mlp, cnn_ar), c10::Error);
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
  ClassifierImpl* own = model.get();
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

TEST(BlasTest, TheLearnersOpenBlasThreadsLeaveLibtorchsThreadsAsTheyAre) {
  using Parallel = int (*)();
  auto parallel = reinterpret_cast<Parallel>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  if (parallel == nullptr) GTEST_SKIP() << "OpenBLAS is not loaded (scripts/install-deps.sh)";
  const bool openmp = parallel() == 2;
  torch::set_num_threads(2);
  const std::string line = ConfigureBlas(LearnerBlasThreads(2));
  EXPECT_EQ(torch::get_num_threads(), 2) << line;
  if (openmp) {
    // One OpenMP pool: OpenBLAS takes the learner's threads, and setting its threads sets
    // libtorch's, which is why a learner passes LearnerBlasThreads.
    EXPECT_EQ(LearnerBlasThreads(2), 2);
    EXPECT_THAT(line, ::testing::HasSubstr("USE_OPENMP"));
    EXPECT_THAT(line, ::testing::EndsWith("2 threads"));
    ConfigureBlas(1);
    EXPECT_EQ(torch::get_num_threads(), 1);
  } else {
    EXPECT_EQ(LearnerBlasThreads(2), 1);
    EXPECT_THAT(line, ::testing::EndsWith("1 thread"));
  }
  // A GEMM on either runs and is right.
  torch::Tensor a = torch::rand({96, 80}), b = torch::rand({80, 64});
  EXPECT_TRUE(torch::allclose(torch::mm(a, b), (a.unsqueeze(2) * b.unsqueeze(0)).sum(1), 1e-4));
  torch::set_num_threads(1);
  ConfigureBlas(LearnerBlasThreads(1));
}

}  // namespace
}  // namespace weft::train
