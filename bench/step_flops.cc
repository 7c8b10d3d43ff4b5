// How close a weft training step comes to the cores' peak (issue 19): the achieved FLOP/s of a
// training step of each built-in model (the learner's own TorchScript models, each layer on the
// kernel weft-learner would pick, and FusedAdam, as bench_bare_loop trains them) against the rate
// of a large single-precision GEMM on the same threads, measured in the same run — with torch::mm
// (the BLAS this binary loads as weft-learner does: OpenBLAS's OpenMP build through its run path,
// src/train/blas.h) and with oneDNN (the GEMM as a 1×1 convolution, the path weft's dense layers
// take); the faster is the peak.
//
// A step's FLOPs are counted analytically from the layer shapes, 2 per multiply-add: forward,
// then backward = the weight gradient of every layer plus the input gradient of every layer but
// the first. Element-wise work (ReLU, pooling, the loss, Adam) is left out, so the figure slightly
// understates the work done.
//
// Usage: bench_step_flops THREADS [BATCH=64] [SECONDS=3]
// Prints one line per measurement and a JSON line at the end.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "job/job_spec.h"
#include "train/blas.h"
#include "train/fused_adam.h"
#include "train/models.h"

namespace {

using Clock = std::chrono::steady_clock;

// Multiply-adds per sample of one layer's forward pass.
struct Layer {
  const char* name;
  double macs;
};

// weft's built-in CNN (train/models.cc): conv 1→32 3×3 pad 1 on 28×28, pool 2, conv 32→64 3×3
// pad 1 on 14×14, pool 2, dense 3136→128, dense 128→10.
std::vector<Layer> CnnLayers() {
  return {{"conv1", 28.0 * 28 * 32 * (1 * 3 * 3)},
          {"conv2", 14.0 * 14 * 64 * (32 * 3 * 3)},
          {"fc1", 64.0 * 7 * 7 * 128},
          {"fc2", 128.0 * 10}};
}

// The MLP bench_bare_loop trains: 784→256→128→10.
std::vector<Layer> MlpLayers() {
  return {{"fc1", 784.0 * 256}, {"fc2", 256.0 * 128}, {"fc3", 128.0 * 10}};
}

// FLOPs of one training step per sample: 2 × (forward + weight grads + input grads but the first).
double StepFlopsPerSample(const std::vector<Layer>& layers) {
  double macs = 0;
  for (size_t i = 0; i < layers.size(); ++i) macs += layers[i].macs * (i == 0 ? 2 : 3);
  return 2 * macs;
}

// Runs `fn` repeatedly for about `seconds` after one warm-up call; returns calls per second.
template <typename Fn>
double Rate(double seconds, Fn fn) {
  fn();
  int64_t calls = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (elapsed < seconds);
  return calls / elapsed;
}

// GFLOP/s of an n×n by n×n float GEMM with torch::mm (the loaded BLAS).
double BlasGemm(int64_t n, double seconds) {
  torch::Tensor a = torch::randn({n, n}), b = torch::randn({n, n});
  torch::Tensor c;
  return Rate(seconds, [&] { c = torch::mm(a, b); }) * 2.0 * n * n * n / 1e9;
}

// GFLOP/s of the same GEMM on oneDNN: a 1×1 convolution of n input channels to n output channels
// over n positions (batch n of 1×1 images) is an n×n×n GEMM.
double OneDnnGemm(int64_t n, double seconds) {
  torch::Tensor x = torch::randn({n, n, 1, 1}), w = torch::randn({n, n, 1, 1});
  torch::Tensor y;
  return Rate(seconds, [&] { y = torch::conv2d(x, w); }) * 2.0 * n * n * n / 1e9;
}

// Training steps per second of weft's built-in `arch` ("cnn" or "mlp") at `batch`, Adam 1e-3,
// on random inputs (the step's time does not depend on the pixels).
double StepsPerSecond(const std::string& arch, int64_t batch, double seconds) {
  weft::ModelSpec spec;
  spec.architecture = arch;
  if (arch == "mlp") spec.hidden_units = {256, 128};
  std::optional<weft::train::Kernel> forced = weft::train::KernelFromEnvironment();
  weft::train::LayerKernels kernels =
      forced ? weft::train::LayerKernels(*forced)
             : weft::train::ChooseKernels(spec, weft::train::kImageShape,
                                          weft::train::kImageClasses, batch);
  auto model = weft::train::BuildModel(spec, "", weft::train::kImageShape,
                                       weft::train::kImageClasses, kernels);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    std::exit(1);
  }
  weft::train::FusedAdam opt((*model)->parameters(), torch::optim::AdamOptions(1e-3));
  torch::Tensor x = torch::rand({batch, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {batch}, torch::TensorOptions().dtype(torch::kInt64));
  return Rate(seconds, [&] {
    opt.zero_grad();
    torch::Tensor loss = torch::nll_loss((*model)->forward(x), y);
    loss.backward();
    opt.step();
    loss.item<double>();
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s THREADS [BATCH=64] [SECONDS=3]\n", argv[0]);
    return 2;
  }
  const int threads = std::stoi(argv[1]);
  const int64_t batch = argc > 2 ? std::stoll(argv[2]) : 64;
  const double seconds = argc > 3 ? std::stod(argv[3]) : 3;
  torch::manual_seed(0);
  torch::set_num_threads(threads);
  std::printf("%s\n", weft::train::ConfigureBlas(threads).c_str());

  const double blas = BlasGemm(1024, seconds);
  const double onednn = OneDnnGemm(1024, seconds);
  const double peak = std::max(blas, onednn);
  std::printf(
      "threads %d: 1024^3 float GEMM %.1f GFLOP/s with torch::mm (loaded BLAS), %.1f "
      "GFLOP/s with oneDNN\n",
      threads, blas, onednn);
  struct Result {
    const char* arch;
    double step_flops, steps_per_s, gflops;
  };
  std::vector<Result> results;
  // The training steps run as a learner runs them (train/blas.h).
  std::printf("training steps: %s\n",
              weft::train::ConfigureBlas(weft::train::LearnerBlasThreads(threads)).c_str());
  for (const char* arch : {"cnn", "mlp"}) {
    const double flops =
        StepFlopsPerSample(std::string(arch) == "cnn" ? CnnLayers() : MlpLayers()) *
        static_cast<double>(batch);
    const double steps = StepsPerSecond(arch, batch, seconds);
    results.push_back({arch, flops, steps, flops * steps / 1e9});
    std::printf(
        "%s, batch %ld: %.2f MFLOP per step, %.1f steps/s = %.1f GFLOP/s, %.0f %% of the "
        "GEMM peak\n",
        arch, batch, flops / 1e6, steps, flops * steps / 1e9, 100 * flops * steps / 1e9 / peak);
  }
  std::printf(
      "{\"bench\": \"step_flops\", \"threads\": %d, \"batch\": %ld, "
      "\"gemm_gflops\": {\"blas\": %.2f, \"onednn\": %.2f}",
      threads, batch, blas, onednn);
  for (const Result& r : results) {
    std::printf(
        ", \"%s\": {\"step_mflop\": %.3f, \"steps_per_s\": %.2f, \"gflops\": %.2f, "
        "\"fraction_of_peak\": %.3f}",
        r.arch, r.step_flops / 1e6, r.steps_per_s, r.gflops, r.gflops / peak);
  }
  std::printf("}\n");
  return 0;
}
