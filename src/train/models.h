// The models a learner trains, all TorchScript: weft's built-ins and a tenant's own. Input a batch
// of the data set's samples [N, ...] float32 (train/dataset.h: [N, 1, 28, 28] for IDX images,
// [N, F] for tabular data); output logits [N, classes], which ClassifierImpl turns into
// log-probabilities.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_spec.h"
#include "job/kernel_cache.h"

namespace weft::train {

// The two kernels a built-in layer can run on. A fully connected layer y = x·Wᵀ + b (W [out, in],
// b [out]):
//   kOneDnn: as the equivalent convolution (W viewed as [out, C, H, W], or [out, in, 1, 1] for a
//            flat input), which libtorch hands to oneDNN's JIT kernels;
//   kBlas:   aten::linear, a GEMM in the loaded BLAS.
// A 3×3 convolution:
//   kOneDnn: aten::conv2d, which libtorch hands to oneDNN;
//   kBlas:   aten::thnn_conv2d, im2col and a GEMM in the loaded BLAS.
// Same parameters, same result up to float rounding (≈1e-4 on 3136 inputs). Which is faster
// depends on the layer's shape, the batch, the threads and the BLAS: weft-learner loads OpenBLAS
// (scripts/install-deps.sh; on the netlib reference BLAS Debian's libtorch loads otherwise, kBlas
// is 5–10× slower per dense layer), and ChooseKernels times both per layer. Measured at batch 64,
// one thread, forward + backward, with OpenBLAS (one run): conv1 9.8 ms on kOneDnn against 4.9
// ms on kBlas, conv2 20.6 against 29.0, fc1 (3136→128) 8.7 against 2.6, fc2 0.22 against 0.06;
// the MLP's 784→256 2.6 against 0.9 (docs/design.md, "The learner's kernels and memory").
enum class Kernel { kOneDnn, kBlas };

// "onednn" or "blas".
const char* KernelName(Kernel kernel);

// The kernel WEFT_LEARNER_KERNELS (or the older WEFT_LEARNER_DENSE) forces on every layer:
// "onednn" or "blas"; nullopt when it is unset or "auto" (ChooseKernels decides per layer).
std::optional<Kernel> KernelFromEnvironment();

// The kernel of each layer of a built-in model, by layer name (conv1, conv2, fc1, ...); a layer
// not named runs on `fallback`.
struct LayerKernels {
  LayerKernels(Kernel all = Kernel::kOneDnn) : fallback(all) {}  // NOLINT: every layer on `all`
  std::map<std::string, Kernel> by_layer;
  Kernel fallback;
  Kernel For(const std::string& layer) const;
};

// Times every layer of the built-in model `spec` names on both kernels — forward and backward of
// the layer alone on constant inputs of its shape at `batch` samples (the global RNG is not
// touched), with the threads libtorch has
// now, the best of several runs after a warm-up (a few milliseconds per layer) — and gives each
// the faster; then times that choice as a whole forward + backward against every layer on
// kOneDnn and every layer on kBlas and keeps the fastest of the three (layers timed alone miss
// how their kernels' threads contend). `log`, if given, gets one line per layer ("fc1 [64, 784]
// → 256: oneDNN 0.41 ms, BLAS 0.19 ms: blas") and one for the whole step ("the whole step: per
// layer 11.2 ms, oneDNN 11.0 ms, BLAS 24.9 ms: oneDNN"). Every layer on kOneDnn for a TorchScript
// model or an architecture it does not know. With a `cache`, a layer whose shape it holds under
// `context` (what else the timing depends on: the CPU, the BLAS, its threads, the layout) takes the
// cached kernel untimed (logged "… blas, cached"; when every layer is cached the whole step is not
// timed), and each layer's final choice is put in it; saving it is the caller's.
LayerKernels ChooseKernels(const ModelSpec& spec, const std::vector<int64_t>& sample_shape,
                           int64_t classes, int64_t batch, std::vector<std::string>* log = nullptr,
                           KernelCache* cache = nullptr, const std::string& context = "");

// One sample's shape and the number of classes of Fashion-MNIST and MNIST.
inline const std::vector<int64_t> kImageShape = {1, 28, 28};
inline constexpr int64_t kImageClasses = 10;

// A built-in model as a TorchScript module, defined with jit::Module::define over torch.*
// builtins, each layer on its kernel in `kernels`, for samples of `sample_shape` and `classes`
// classes:
//   cnn: two conv(3×3, pad 1)+ReLU+max-pool(2) layers (1→32→64 channels) and two fully
//        connected layers (3136→128→classes): the 2-conv baseline of the Fashion-MNIST benchmark
//        (≈0.916 accuracy) and of ../shared/reference/pytorch_fmnist_cnn.py; samples [1, 28, 28]
//        only;
//   mlp: F → hidden_units[0] → ... → classes, ReLU between layers, F the product of
//        `sample_shape` (784 for the images).
// forward maps [N, sample_shape...] float32 to logits [N, classes]. Parameters are named
// <layer>_weight and <layer>_bias (conv1, conv2, fc1, fc2; fc1 … fcK for the MLP), initialised
// from the global RNG as torch::nn::Conv2d and torch::nn::Linear initialise theirs.
// InvalidArgument for another architecture, or the CNN on samples that are not [1, 28, 28] (the
// message starts with "model.architecture: ").
absl::StatusOr<torch::jit::Module> MakeBuiltinModule(
    const ModelSpec& spec, const LayerKernels& kernels,
    const std::vector<int64_t>& sample_shape = kImageShape, int64_t classes = kImageClasses);

// Every model a learner trains: a TorchScript module (a built-in or the tenant's own, whose
// forward maps samples [N, ...] float32 to logits [N, classes]) seen as an nn::Module. Its
// parameters and buffers are this module's too (the same tensors, names with '.' as '_'), so
// optimizers, checkpoints and gradient all-reduce see them; forward adds log_softmax, making the
// loss cross-entropy; train()/eval() switch the TorchScript module's mode too (dropout, batch
// norm). The module runs without the graph executor's optimisations: measured on the CNN's training
// step (batch 64, one thread) the profiling executor made it 0.71–0.82× as fast, plain
// interpretation 1.00×, of the same layers written as an nn::Module.
class ClassifierImpl : public torch::nn::Module {
 public:
  explicit ClassifierImpl(torch::jit::Module module);
  // Log-probabilities [N, classes] for samples `x` [N, ...].
  torch::Tensor forward(torch::Tensor x);
  void train(bool on = true) override;
  // torch.jit.save format: what torch.jit.load (Python) and torch::jit::load (C++) read.
  void Save(std::ostream& out) const;
  // The module's logits [N, classes] for samples `x` [N, ...], in eval mode, without gradients.
  torch::Tensor Logits(const torch::Tensor& x);

 private:
  mutable torch::jit::Module module_;
};

// Builds the model the spec names for samples of `sample_shape` and `classes` classes, a built-in's
// layers on `kernels`; for architecture torchscript loads
// TorchScriptPath(`model_dir`) and checks that forward maps [2, sample_shape...] to
// [2, classes]. InvalidArgument for an unknown architecture, the CNN on samples it cannot take, a
// file that is not a TorchScript module, or a forward of another shape (the message starts with
// "model.architecture:" or "model.torchscript:").
absl::StatusOr<std::shared_ptr<ClassifierImpl>> BuildModel(
    const ModelSpec& spec, const std::string& model_dir = "",
    const std::vector<int64_t>& sample_shape = kImageShape, int64_t classes = kImageClasses,
    const LayerKernels& kernels = {});

// Loads `model`'s parameters and buffers from `archive`, written by nn::Module::save of a model of
// the same architecture — or, for a built-in, by weft's learners before the built-ins were
// TorchScript, which saved one sub-archive per layer (conv1 → weight, bias): their checkpoints
// still resume. Throws c10::Error, and changes nothing, unless one of the layouts holds every
// parameter and buffer at the model's shape.
void LoadParameters(ClassifierImpl& model, torch::serialize::InputArchive& archive);

}  // namespace weft::train
