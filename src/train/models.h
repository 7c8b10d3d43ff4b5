// weft's built-in models for 28×28 grey-scale images with 10 classes (MNIST, Fashion-MNIST), and
// a tenant's own as TorchScript. Input [N, 1, 28, 28] float, normalised; output [N, 10]
// log-probabilities.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "job/job_spec.h"

namespace weft::train {

// How fully connected layers compute y = x·Wᵀ + b.
//   kOneDnn: as the equivalent convolution (weight [out, in] viewed as [out, C, H, W], or
//            [out, in, 1, 1] for a flat input), which libtorch hands to oneDNN's JIT kernels;
//   kBlas:   torch::nn::Linear's own path, a GEMM in the system BLAS.
// Same parameters, same result up to float rounding (≈1e-4 on 3136 inputs). Debian's libtorch
// calls the netlib reference BLAS, and there kOneDnn is 5–10× faster per layer: measured at
// batch 64, one thread, forward + backward, 3136→128 47 ms vs 4–9 ms, 784→256 30–34 ms vs
// 3–4 ms, 128→10 0.17 ms vs 0.22 ms.
enum class DenseKernel { kOneDnn, kBlas };

// kBlas when the environment has WEFT_LEARNER_DENSE=blas (for comparison with stock libtorch),
// else kOneDnn.
DenseKernel DenseKernelFromEnvironment();

// y [N, out] = x·Wᵀ + b with `layer`'s weight [out, in] and bias [out]; x is [N, in] or
// [N, C, H, W] with C·H·W = in (flattened in that order).
torch::Tensor Dense(const torch::nn::Linear& layer, const torch::Tensor& x, DenseKernel kernel);

// A classifier: forward maps images [N, 1, 28, 28] to log-probabilities [N, 10].
class ClassifierImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// Two conv(3×3, pad 1)+ReLU+max-pool(2) layers (1→32→64 channels) and two fully connected
// layers (3136→128→10): the 2-conv baseline of the Fashion-MNIST benchmark (≈0.916 accuracy)
// and of ../shared/reference/pytorch_fmnist_cnn.py.
class CnnImpl : public ClassifierImpl {
 public:
  explicit CnnImpl(DenseKernel dense = DenseKernel::kOneDnn);
  torch::Tensor forward(torch::Tensor x) override;

 private:
  DenseKernel dense_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

// A multi-layer perceptron: 784 → hidden_units[0] → ... → 10, ReLU between layers.
class MlpImpl : public ClassifierImpl {
 public:
  explicit MlpImpl(const std::vector<int>& hidden_units, DenseKernel dense = DenseKernel::kOneDnn);
  torch::Tensor forward(torch::Tensor x) override;

 private:
  DenseKernel dense_;
  std::vector<torch::nn::Linear> layers_;
};

// A tenant's own model (model.torchscript): a TorchScript module whose forward maps
// [N, 1, 28, 28] float32 to logits [N, 10]. Its parameters and buffers are this module's too (the
// same tensors, names with '.' as '_'), so optimizers, checkpoints and gradient all-reduce treat
// it like a built-in; forward adds log_softmax, making the loss cross-entropy; train()/eval()
// switch the TorchScript module's mode too (dropout, batch norm).
class TorchScriptImpl : public ClassifierImpl {
 public:
  explicit TorchScriptImpl(torch::jit::Module module);
  torch::Tensor forward(torch::Tensor x) override;
  void train(bool on = true) override;
  // torch.jit.save format: what torch.jit.load (Python) and torch::jit::load (C++) read.
  void Save(std::ostream& out) const;
  // The module's logits [N, 10] for `x` [N, 1, 28, 28], in eval mode, without gradients.
  torch::Tensor Logits(const torch::Tensor& x);

 private:
  mutable torch::jit::Module module_;
};

// Builds the model the spec names, its dense layers on DenseKernelFromEnvironment(); for
// architecture torchscript loads TorchScriptPath(`model_dir`) and checks that forward maps
// [2, 1, 28, 28] to [2, 10]. InvalidArgument for an unknown architecture, a file that is not a
// TorchScript module, or a forward of another shape (the message starts with
// "model.torchscript:").
absl::StatusOr<std::shared_ptr<ClassifierImpl>> BuildModel(const ModelSpec& spec,
                                                           const std::string& model_dir = "");

}  // namespace weft::train
