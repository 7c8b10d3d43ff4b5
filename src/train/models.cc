#include "train/models.h"

#include "absl/strings/str_cat.h"

namespace weft::train {

namespace F = torch::nn::functional;

CnnImpl::CnnImpl() {
  conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
  conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
  fc1_ = register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128));
  fc2_ = register_module("fc2", torch::nn::Linear(128, 10));
}

torch::Tensor CnnImpl::forward(torch::Tensor x) {
  x = F::max_pool2d(torch::relu(conv1_->forward(x)), F::MaxPool2dFuncOptions(2));
  x = F::max_pool2d(torch::relu(conv2_->forward(x)), F::MaxPool2dFuncOptions(2));
  x = torch::relu(fc1_->forward(x.flatten(1)));
  return torch::log_softmax(fc2_->forward(x), 1);
}

MlpImpl::MlpImpl(const std::vector<int>& hidden_units) {
  int64_t in = 28 * 28;
  for (size_t i = 0; i < hidden_units.size(); ++i) {
    layers_.push_back(register_module(absl::StrCat("fc", i + 1), torch::nn::Linear(in, hidden_units[i])));
    in = hidden_units[i];
  }
  layers_.push_back(register_module(absl::StrCat("fc", hidden_units.size() + 1), torch::nn::Linear(in, 10)));
}

torch::Tensor MlpImpl::forward(torch::Tensor x) {
  x = x.flatten(1);
  for (size_t i = 0; i + 1 < layers_.size(); ++i) x = torch::relu(layers_[i]->forward(x));
  return torch::log_softmax(layers_.back()->forward(x), 1);
}

absl::StatusOr<std::shared_ptr<ClassifierImpl>> BuildModel(const ModelSpec& spec) {
  if (spec.architecture == "cnn") return std::shared_ptr<ClassifierImpl>(std::make_shared<CnnImpl>());
  if (spec.architecture == "mlp") {
    return std::shared_ptr<ClassifierImpl>(std::make_shared<MlpImpl>(spec.hidden_units));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.architecture: unknown '", spec.architecture, "' (cnn, mlp)"));
}

}  // namespace weft::train
