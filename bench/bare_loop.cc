// The baseline of bench/overhead.sh: the same model, data, batch size, threads and number of
// steps as a weft job, trained by a bare libtorch loop with nothing around it (no weftd, no
// reporting). Prints one JSON line: {"bench": "bare_loop", "samples_per_s": ..., ...}.
//
// Usage: bench_bare_loop ARCH THREADS BATCH STEPS [DATA_DIR]
//   ARCH: cnn or mlp (hidden 256, 128) as weft-learner builds them (TorchScript), or cnn-module
//   or mlp-module: the same layers, initialisation and oneDNN dense path written as a plain
//   nn::Module, as the learner defined them before the built-ins were TorchScript
//   (bench/torchscript_compare.sh compares the two). The built-ins' kernels as weft-learner
//   picks them: WEFT_LEARNER_KERNELS=onednn|blas forces one, else each layer is timed.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "job/job_spec.h"
#include "train/allocator.h"
#include "train/blas.h"
#include "train/dataset.h"
#include "train/fused_adam.h"
#include "train/models.h"

namespace {

namespace F = torch::nn::functional;

// y = x·Wᵀ + b as the equivalent convolution (oneDNN), x [N, in] or [N, C, H, W].
torch::Tensor Dense(const torch::nn::Linear& layer, const torch::Tensor& x) {
  const torch::Tensor& w = layer->weight;
  torch::Tensor input = x.dim() == 4 ? x : x.reshape({x.size(0), -1, 1, 1});
  return torch::conv2d(input, w.view({w.size(0), input.size(1), input.size(2), input.size(3)}),
                       layer->bias)
      .flatten(1);
}

struct ModuleModel : torch::nn::Module {
  explicit ModuleModel(bool cnn) : cnn_(cnn) {
    if (cnn) {
      conv1_ = register_module("conv1",
                               torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
      conv2_ = register_module("conv2",
                               torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
      fc_.push_back(register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128)));
      fc_.push_back(register_module("fc2", torch::nn::Linear(128, 10)));
    } else {
      fc_.push_back(register_module("fc1", torch::nn::Linear(784, 256)));
      fc_.push_back(register_module("fc2", torch::nn::Linear(256, 128)));
      fc_.push_back(register_module("fc3", torch::nn::Linear(128, 10)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    if (cnn_) {
      x = F::max_pool2d(torch::relu(conv1_->forward(x)), F::MaxPool2dFuncOptions(2));
      x = F::max_pool2d(torch::relu(conv2_->forward(x)), F::MaxPool2dFuncOptions(2));
    } else {
      x = x.flatten(1);
    }
    for (size_t i = 0; i + 1 < fc_.size(); ++i) x = torch::relu(Dense(fc_[i], x));
    return torch::log_softmax(Dense(fc_.back(), x), 1);
  }
  bool cnn_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  std::vector<torch::nn::Linear> fc_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s ARCH THREADS BATCH STEPS [DATA_DIR]\n", argv[0]);
    return 2;
  }
  std::string arch = argv[1];
  int threads = std::stoi(argv[2]);
  int64_t batch = std::stoll(argv[3]);
  int64_t steps = std::stoll(argv[4]);
  std::string dir = argc > 5 ? argv[5] : weft::kDefaultDataPath;

  // The same allocator settings as weft-learner (WEFT_LEARNER_MALLOC=default: glibc's own).
  std::fprintf(stderr, "%s\n", weft::train::TuneAllocatorForTraining().c_str());
  torch::manual_seed(0);
  torch::set_num_threads(threads);
  std::fprintf(stderr, "%s\n",
               weft::train::ConfigureBlas(weft::train::LearnerBlasThreads(threads)).c_str());
  auto train = weft::train::LoadDataset(dir, "train", steps * batch);
  if (!train.ok()) {
    std::fprintf(stderr, "%s\n", std::string(train.status().message()).c_str());
    return 1;
  }
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::vector<torch::Tensor> parameters;
  if (arch == "cnn-module" || arch == "mlp-module") {
    auto module = std::make_shared<ModuleModel>(arch == "cnn-module");
    forward = [module](const torch::Tensor& x) { return module->forward(x); };
    parameters = module->parameters();
  } else {
    weft::ModelSpec spec;
    spec.architecture = arch;
    if (arch == "mlp") spec.hidden_units = {256, 128};
    // The kernels as weft-learner picks them: forced by WEFT_LEARNER_KERNELS, else timed per layer.
    std::optional<weft::train::Kernel> forced = weft::train::KernelFromEnvironment();
    std::vector<std::string> log;
    weft::train::LayerKernels kernels =
        forced ? weft::train::LayerKernels(*forced)
               : weft::train::ChooseKernels(spec, weft::train::kImageShape,
                                            weft::train::kImageClasses, batch, &log);
    for (const std::string& line : log) std::fprintf(stderr, "kernel of %s\n", line.c_str());
    auto model = weft::train::BuildModel(spec, "", weft::train::kImageShape,
                                         weft::train::kImageClasses, kernels);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
      return 1;
    }
    forward = [model = *model](const torch::Tensor& x) { return model->forward(x); };
    parameters = (*model)->parameters();
  }
  weft::train::FusedAdam opt(parameters, torch::optim::AdamOptions(1e-3));  // as the learner's
  const int64_t n = train->size();
  // Full batches only; past the data set's end the steps go round it again (a data set of
  // 60,000 samples holds 937 steps of 64), so every step trains `batch` samples.
  const int64_t steps_per_epoch = n / batch;
  if (steps_per_epoch == 0) {
    std::fprintf(stderr, "batch %ld is larger than the %ld samples loaded\n", batch, n);
    return 1;
  }
  auto gen = at::detail::createCPUGenerator(0);
  torch::Tensor perm = torch::randperm(n, gen, torch::TensorOptions().dtype(torch::kInt64));
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t first = (s % steps_per_epoch) * batch;
    torch::Tensor idx = perm.slice(0, first, first + batch);
    opt.zero_grad();
    torch::Tensor loss =
        torch::nll_loss(forward(train->Batch(idx)), train->labels.index_select(0, idx));
    loss.backward();
    opt.step();
    loss.item<double>();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "{\"bench\": \"bare_loop\", \"arch\": \"%s\", \"threads\": %d, \"batch\": %ld, "
      "\"steps\": %ld, \"seconds\": %.3f, \"samples_per_s\": %.1f}\n",
      arch.c_str(), threads, batch, steps, secs, steps * batch / secs);
  return 0;
}
