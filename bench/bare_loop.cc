// The baseline of bench/overhead.sh: the same model, data, batch size, threads and number of
// steps as a weft job, trained by a bare libtorch loop with nothing around it (no weftd, no
// reporting). Prints one JSON line: {"bench": "bare_loop", "samples_per_s": ..., ...}.
//
// Usage: bench_bare_loop ARCH THREADS BATCH STEPS [DATA_DIR]
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "job/job_spec.h"
#include "train/allocator.h"
#include "train/dataset.h"
#include "train/models.h"

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
  auto train = weft::train::LoadDataset(dir, "train", steps * batch);
  if (!train.ok()) {
    std::fprintf(stderr, "%s\n", std::string(train.status().message()).c_str());
    return 1;
  }
  weft::ModelSpec spec;
  spec.architecture = arch;
  if (arch == "mlp") spec.hidden_units = {256, 128};
  auto model = weft::train::BuildModel(spec);
  if (!model.ok()) return 1;
  torch::optim::Adam opt((*model)->parameters(), torch::optim::AdamOptions(1e-3));
  int64_t n = train->size();
  auto gen = at::detail::createCPUGenerator(0);
  torch::Tensor perm = torch::randperm(n, gen, torch::TensorOptions().dtype(torch::kInt64));
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    torch::Tensor idx = perm.slice(0, s * batch, std::min(n, (s + 1) * batch));
    opt.zero_grad();
    torch::Tensor loss = torch::nll_loss((*model)->forward(train->images.index_select(0, idx)),
                                         train->labels.index_select(0, idx));
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
