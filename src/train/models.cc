#include "train/models.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "job/layout.h"

namespace weft::train {

namespace F = torch::nn::functional;

DenseKernel DenseKernelFromEnvironment() {
  const char* v = std::getenv("WEFT_LEARNER_DENSE");
  return v && std::strcmp(v, "blas") == 0 ? DenseKernel::kBlas : DenseKernel::kOneDnn;
}

torch::Tensor Dense(const torch::nn::Linear& layer, const torch::Tensor& x, DenseKernel kernel) {
  if (kernel == DenseKernel::kBlas) return layer.ptr()->forward(x.dim() == 2 ? x : x.flatten(1));
  const torch::Tensor& w = layer->weight;  // [out, in]
  const int64_t out = w.size(0);
  torch::Tensor input = x.dim() == 4 ? x : x.reshape({x.size(0), -1, 1, 1});
  torch::Tensor kernel_weight = w.view({out, input.size(1), input.size(2), input.size(3)});
  return torch::conv2d(input, kernel_weight, layer->bias).flatten(1);
}

CnnImpl::CnnImpl(DenseKernel dense) : dense_(dense) {
  conv1_ =
      register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
  conv2_ =
      register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
  fc1_ = register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128));
  fc2_ = register_module("fc2", torch::nn::Linear(128, 10));
}

torch::Tensor CnnImpl::forward(torch::Tensor x) {
  x = F::max_pool2d(torch::relu(conv1_->forward(x)), F::MaxPool2dFuncOptions(2));
  x = F::max_pool2d(torch::relu(conv2_->forward(x)), F::MaxPool2dFuncOptions(2));
  x = torch::relu(Dense(fc1_, x, dense_));
  return torch::log_softmax(Dense(fc2_, x, dense_), 1);
}

MlpImpl::MlpImpl(const std::vector<int>& hidden_units, DenseKernel dense) : dense_(dense) {
  int64_t in = 28 * 28;
  for (size_t i = 0; i < hidden_units.size(); ++i) {
    layers_.push_back(
        register_module(absl::StrCat("fc", i + 1), torch::nn::Linear(in, hidden_units[i])));
    in = hidden_units[i];
  }
  layers_.push_back(
      register_module(absl::StrCat("fc", hidden_units.size() + 1), torch::nn::Linear(in, 10)));
}

torch::Tensor MlpImpl::forward(torch::Tensor x) {
  x = x.flatten(1);
  for (size_t i = 0; i + 1 < layers_.size(); ++i) x = torch::relu(Dense(layers_[i], x, dense_));
  return torch::log_softmax(Dense(layers_.back(), x, dense_), 1);
}

TorchScriptImpl::TorchScriptImpl(torch::jit::Module module) : module_(std::move(module)) {
  auto flat = [](std::string name) {
    std::replace(name.begin(), name.end(), '.', '_');
    return name;
  };
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
    register_parameter(flat(p.name), p.value, p.value.requires_grad());
  }
  for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
    register_buffer(flat(b.name), b.value);
  }
}

torch::Tensor TorchScriptImpl::forward(torch::Tensor x) {
  return torch::log_softmax(module_.forward({std::move(x)}).toTensor(), 1);
}

void TorchScriptImpl::train(bool on) {
  ClassifierImpl::train(on);
  module_.train(on);
}

void TorchScriptImpl::Save(std::ostream& out) const { module_.save(out); }

torch::Tensor TorchScriptImpl::Logits(const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  const bool was_training = is_training();
  train(false);
  torch::Tensor logits = module_.forward({x}).toTensor();
  train(was_training);
  return logits;
}

namespace {

absl::StatusOr<std::shared_ptr<ClassifierImpl>> LoadTorchScript(const std::string& model_dir) {
  const std::string path = TorchScriptPath(model_dir);
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return absl::InvalidArgumentError(absl::StrCat(
        "model.torchscript: ", path, " is not a TorchScript module (torch.jit.save): ", what));
  }
  auto model = std::make_shared<TorchScriptImpl>(std::move(module));
  bool trainable = false;
  for (const torch::Tensor& p : model->parameters()) trainable = trainable || p.requires_grad();
  if (!trainable) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.torchscript: none of its ", model->parameters().size(),
                     " parameters requires a gradient, so there is nothing to train"));
  }
  try {
    torch::Tensor logits = model->Logits(torch::zeros({2, 1, 28, 28}));
    if (logits.dim() != 2 || logits.size(0) != 2 || logits.size(1) != 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.torchscript: forward maps [2, 1, 28, 28] to ",
                       torch::str(logits.sizes()), "; it must give logits [2, 10]"));
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return absl::InvalidArgumentError(
        absl::StrCat("model.torchscript: forward fails on [2, 1, 28, 28] float32: ", what));
  }
  return std::shared_ptr<ClassifierImpl>(model);
}

}  // namespace

absl::StatusOr<std::shared_ptr<ClassifierImpl>> BuildModel(const ModelSpec& spec,
                                                           const std::string& model_dir) {
  if (spec.architecture == "torchscript") return LoadTorchScript(model_dir);
  const DenseKernel dense = DenseKernelFromEnvironment();
  if (spec.architecture == "cnn") {
    return std::shared_ptr<ClassifierImpl>(std::make_shared<CnnImpl>(dense));
  }
  if (spec.architecture == "mlp") {
    return std::shared_ptr<ClassifierImpl>(std::make_shared<MlpImpl>(spec.hidden_units, dense));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.architecture: unknown '", spec.architecture, "' (cnn, mlp)"));
}

}  // namespace weft::train
