// weft's built-in models for 28×28 grey-scale images with 10 classes (MNIST, Fashion-MNIST).
// Input [N, 1, 28, 28] float, normalised; output [N, 10] log-probabilities.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "absl/status/statusor.h"
#include "spec/job_spec.h"

namespace weft::train {

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
  CnnImpl();
  torch::Tensor forward(torch::Tensor x) override;

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

// A multi-layer perceptron: 784 → hidden_units[0] → ... → 10, ReLU between layers.
class MlpImpl : public ClassifierImpl {
 public:
  explicit MlpImpl(const std::vector<int>& hidden_units);
  torch::Tensor forward(torch::Tensor x) override;

 private:
  std::vector<torch::nn::Linear> layers_;
};

// Builds the model the spec names. InvalidArgument for an unknown architecture.
absl::StatusOr<std::shared_ptr<ClassifierImpl>> BuildModel(const ModelSpec& spec);

}  // namespace weft::train
