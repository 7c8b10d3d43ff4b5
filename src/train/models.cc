#include "train/models.h"

#include <torch/csrc/jit/runtime/graph_executor.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "job/layout.h"

namespace weft::train {

const char* KernelName(Kernel kernel) { return kernel == Kernel::kBlas ? "blas" : "onednn"; }

std::optional<Kernel> KernelFromEnvironment() {
  const char* v = std::getenv("WEFT_LEARNER_KERNELS");
  if (v == nullptr) v = std::getenv("WEFT_LEARNER_DENSE");
  if (v != nullptr && std::strcmp(v, "blas") == 0) return Kernel::kBlas;
  if (v != nullptr && std::strcmp(v, "onednn") == 0) return Kernel::kOneDnn;
  return std::nullopt;
}

Kernel LayerKernels::For(const std::string& layer) const {
  auto it = by_layer.find(layer);
  return it == by_layer.end() ? fallback : it->second;
}

namespace {

// c10::MemoryFormat::ChannelsLast as TorchScript spells it (an int; torch.channels_last is not
// defined for a module built from C++).
constexpr int kChannelsLast = static_cast<int>(c10::MemoryFormat::ChannelsLast);

// TorchScript for y = x·Wᵀ + b of layer `name` (parameters <name>_weight [out, in], <name>_bias)
// on `x`, which is [N, in] or, when `maps` is given, [N, C, H, W] with C·H·W = in.
std::string DenseSource(const std::string& name, const std::string& x, int64_t in, int64_t out,
                        Kernel kernel, const std::string& maps = "") {
  const std::string w = "self." + name + "_weight", b = "self." + name + "_bias";
  if (kernel == Kernel::kBlas) {
    return absl::StrCat("torch.linear(torch.flatten(", x, ", 1), ", w, ", ", b, ")");
  }
  if (!maps.empty()) {
    return absl::StrCat("torch.flatten(torch.conv2d(", x, ", ", w, ".view([", out, ", ", maps,
                        "]), ", b, "), 1)");
  }
  return absl::StrCat("torch.flatten(torch.conv2d(", x, ".reshape([", x, ".size(0), ", in,
                      ", 1, 1]), ", w, ".view([", out, ", ", in, ", 1, 1]), ", b, "), 1)");
}

// TorchScript for the 3×3, padding-1 convolution of layer `name` on `x` [N, C, H, W], stored
// channels-last (see MakeBuiltinModule) and returned so. The BLAS convolution (im2col + GEMM)
// takes and gives contiguous NCHW, so its input and output are converted.
std::string ConvSource(const std::string& name, const std::string& x, Kernel kernel) {
  const std::string w = "self." + name + "_weight", b = "self." + name + "_bias";
  if (kernel == Kernel::kBlas) {
    return absl::StrCat("torch.thnn_conv2d(", x, ".contiguous(), ", w, ", [3, 3], ", b,
                        ", [1, 1], [1, 1]).contiguous(memory_format=", kChannelsLast, ")");
  }
  return absl::StrCat("torch.conv2d(", x, ", ", w, ", ", b, ", [1, 1], [1, 1])");
}

// A layer of a built-in model as ChooseKernels times it.
struct LayerShape {
  std::string name;
  bool conv = false;
  std::vector<int64_t> input;  // one sample's shape: [C, H, W] for a convolution
  int64_t out = 0;             // output features or maps
  bool first = false;          // no gradient for its input
};

std::vector<LayerShape> BuiltinLayers(const ModelSpec& spec,
                                      const std::vector<int64_t>& sample_shape, int64_t classes) {
  if (spec.architecture == "cnn") {
    return {{"conv1", true, {1, 28, 28}, 32, true},
            {"conv2", true, {32, 14, 14}, 64, false},
            {"fc1", false, {64, 7, 7}, 128, false},
            {"fc2", false, {128}, classes, false}};
  }
  std::vector<LayerShape> out;
  if (spec.architecture != "mlp") return out;
  int64_t in = 1;
  for (int64_t d : sample_shape) in *= d;
  const size_t layers = spec.hidden_units.size() + 1;
  for (size_t i = 0; i < layers; ++i) {
    const int64_t width = i + 1 < layers ? spec.hidden_units[i] : classes;
    out.push_back({absl::StrCat("fc", i + 1), false, {in}, width, i == 0});
    in = width;
  }
  return out;
}

// Milliseconds of one forward + backward of `layer` on `kernel` at `batch` samples: the best of
// up to 20 runs (at least 3, at most ~30 ms of them) after a warm-up.
double TimeLayer(const LayerShape& layer, Kernel kernel, int64_t batch) {
  std::vector<int64_t> shape = {batch};
  shape.insert(shape.end(), layer.input.begin(), layer.input.end());
  // Constant inputs: the time does not depend on the values, and the global RNG, which
  // initialises the model after this, is left alone.
  // A 4-D input is stored channels-last, as the model passes it (MakeBuiltinModule).
  torch::Tensor x = shape.size() == 4 ? torch::full({shape[0], shape[2], shape[3], shape[1]}, 0.01)
                                            .permute({0, 3, 1, 2})
                                            .detach()
                                      : torch::full(shape, 0.01);
  x.set_requires_grad(!layer.first);
  int64_t in = 1;
  for (int64_t d : layer.input) in *= d;
  torch::Tensor w = layer.conv ? torch::full({layer.out, layer.input[0], 3, 3}, 0.01)
                               : torch::full({layer.out, in}, 0.01);
  w.set_requires_grad(true);
  torch::Tensor b = torch::full({layer.out}, 0.01).set_requires_grad(true);
  auto run = [&] {
    torch::Tensor y;
    if (layer.conv) {
      y = kernel == Kernel::kBlas ? at::thnn_conv2d(x.contiguous(), w, {3, 3}, b, {1, 1}, {1, 1})
                                        .contiguous(c10::MemoryFormat::ChannelsLast)
                                  : torch::conv2d(x, w, b, 1, 1);
    } else if (kernel == Kernel::kBlas) {
      y = torch::linear(x.flatten(1), w, b);
    } else {
      torch::Tensor x4 = x.dim() == 4 ? x : x.reshape({batch, in, 1, 1});
      y = torch::conv2d(x4, w.view({layer.out, x4.size(1), x4.size(2), x4.size(3)}), b).flatten(1);
    }
    y.backward(torch::ones_like(y));
  };
  run();
  double best = INFINITY, total = 0;
  for (int i = 0; i < 20 && (i < 3 || total < 30); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ms);
    total += ms;
  }
  return best;
}

// Milliseconds of one forward + backward of the whole built-in `spec` with its layers on `kernels`
// at `batch` samples: the best of 4 runs after a warm-up; infinity if it cannot be built. The
// global RNG, which the module's initialisation draws from, is put back as it was.
double TimeModel(const ModelSpec& spec, const LayerKernels& kernels,
                 const std::vector<int64_t>& sample_shape, int64_t classes, int64_t batch) {
  at::Generator rng = at::detail::getDefaultCPUGenerator();
  const torch::Tensor rng_state = rng.get_state();
  absl::StatusOr<torch::jit::Module> module =
      MakeBuiltinModule(spec, kernels, sample_shape, classes);
  rng.set_state(rng_state);
  if (!module.ok()) return INFINITY;
  std::vector<int64_t> shape = {batch};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  const torch::Tensor x = torch::full(shape, 0.01);
  auto run = [&] { module->forward({x}).toTensor().sum().backward(); };
  run();
  double best = INFINITY;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(
        best,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Layers timed alone do not see each other's threads: with 2 threads, OpenBLAS's pthreads and
// libtorch's OpenMP threads each spin on the same cores after their work, and one fc1 on BLAS
// among oneDNN convolutions halved the CNN's step rate (2,700 samples/s against 5,750, though
// fc1 alone timed faster on BLAS). So the per-layer choice is timed as a whole step against every
// layer on oneDNN and every layer on BLAS, and the fastest of the three is kept (logged as "the
// whole step").
LayerKernels CheckOnTheWholeStep(const ModelSpec& spec, const LayerKernels& chosen,
                                 const std::vector<LayerShape>& layers,
                                 const std::vector<int64_t>& sample_shape, int64_t classes,
                                 int64_t batch, std::vector<std::string>* log) {
  auto all = [&](Kernel k) {
    LayerKernels every(k);
    for (const LayerShape& layer : layers) every.by_layer[layer.name] = k;
    return every;
  };
  const std::vector<std::pair<std::string, LayerKernels>> candidates = {
      {"per layer", chosen}, {"oneDNN", all(Kernel::kOneDnn)}, {"BLAS", all(Kernel::kBlas)}};
  torch::AutoGradMode grad(true);
  std::vector<std::string> timings;
  size_t best = 0;
  double best_ms = INFINITY;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i > 0 && candidates[i].second.by_layer == chosen.by_layer) continue;  // timed already
    const double ms = TimeModel(spec, candidates[i].second, sample_shape, classes, batch);
    timings.push_back(absl::StrFormat("%s %.3f ms", candidates[i].first, ms));
    if (ms < best_ms) {
      best = i;
      best_ms = ms;
    }
  }
  if (log != nullptr) {
    log->push_back(absl::StrCat("the whole step: ", absl::StrJoin(timings, ", "), ": ",
                                candidates[best].first));
  }
  return candidates[best].second;
}

// Registers `layer`'s weight and bias, initialised as libtorch's own layer initialises them, as
// <name>_weight and <name>_bias.
void AddLayer(torch::jit::Module& m, const std::string& name, const torch::nn::Module& layer) {
  for (const auto& p : layer.named_parameters(/*recurse=*/false)) {
    m.register_parameter(absl::StrCat(name, "_", p.key()),
                         p.value().detach().clone().set_requires_grad(true), /*is_buffer=*/false);
  }
}

}  // namespace

LayerKernels ChooseKernels(const ModelSpec& spec, const std::vector<int64_t>& sample_shape,
                           int64_t classes, int64_t batch, std::vector<std::string>* log,
                           KernelCache* cache, const std::string& context) {
  LayerKernels kernels;
  const std::vector<LayerShape> layers = BuiltinLayers(spec, sample_shape, classes);
  std::vector<std::string> keys;
  bool timed = false;
  for (const LayerShape& layer : layers) {
    const std::string shape =
        absl::StrFormat("[%d, %s] -> %d%s", batch, absl::StrJoin(layer.input, ", "), layer.out,
                        layer.conv ? " maps 3x3" : "");
    keys.push_back(absl::StrCat(context, " | ", shape));
    if (std::optional<std::string> cached = cache ? cache->Find(keys.back()) : std::nullopt) {
      kernels.by_layer[layer.name] = *cached == "blas" ? Kernel::kBlas : Kernel::kOneDnn;
      if (log != nullptr) {
        log->push_back(absl::StrCat(layer.name, " ", shape, ": ", *cached, ", cached"));
      }
      continue;
    }
    torch::AutoGradMode grad(true);  // the timed backward needs the graph
    const double onednn = TimeLayer(layer, Kernel::kOneDnn, batch);
    const double blas = TimeLayer(layer, Kernel::kBlas, batch);
    const Kernel best = blas < onednn ? Kernel::kBlas : Kernel::kOneDnn;
    kernels.by_layer[layer.name] = best;
    timed = true;
    if (log != nullptr) {
      log->push_back(absl::StrFormat("%s %s: oneDNN %.3f ms, BLAS %.3f ms: %s", layer.name, shape,
                                     onednn, blas, KernelName(best)));
    }
  }
  if (timed) {
    kernels = CheckOnTheWholeStep(spec, kernels, layers, sample_shape, classes, batch, log);
  }
  for (size_t i = 0; cache != nullptr && i < layers.size(); ++i) {
    cache->Put(keys[i], KernelName(kernels.For(layers[i].name)));
  }
  return kernels;
}

absl::StatusOr<torch::jit::Module> MakeBuiltinModule(const ModelSpec& spec,
                                                     const LayerKernels& kernels,
                                                     const std::vector<int64_t>& sample_shape,
                                                     int64_t classes) {
  std::string body;
  torch::jit::Module m;
  if (spec.architecture == "cnn") {
    if (sample_shape != kImageShape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.architecture: cnn takes 28×28 grey images [N, 1, 28, 28]; this data set's "
          "samples are [N, ",
          absl::StrJoin(sample_shape, ", "), "] (the mlp takes any)"));
    }
    m = torch::jit::Module("WeftCnn");
    m.register_attribute("training", c10::BoolType::get(), true);
    AddLayer(m, "conv1", *torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
    AddLayer(m, "conv2", *torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    AddLayer(m, "fc1", *torch::nn::Linear(64 * 7 * 7, 128));
    AddLayer(m, "fc2", *torch::nn::Linear(128, classes));
    // The activations are stored channels-last (NHWC strides of an [N, C, H, W] tensor), which
    // the convolutions (oneDNN) run natively and ATen's max-pool and ReLU run many times faster
    // on: max_pool2d of [128, 32, 28, 28] on 2 threads took 5.5 ms in NCHW, 0.45 ms in NHWC.
    // The view below gives the input those strides without a copy (one channel); the layers
    // keep them. The parameters stay as they were (NCHW), so checkpoints are unchanged.
    body = absl::StrCat(
        "    x = x.reshape([-1, 28, 28, 1]).permute([0, 3, 1, 2])\n",
        "    x = torch.max_pool2d(torch.relu(", ConvSource("conv1", "x", kernels.For("conv1")),
        "), [2, 2])\n", "    x = torch.max_pool2d(torch.relu(",
        ConvSource("conv2", "x", kernels.For("conv2")), "), [2, 2])\n", "    x = torch.relu(",
        DenseSource("fc1", "x", 64 * 7 * 7, 128, kernels.For("fc1"), "64, 7, 7"), ")\n",
        "    return ", DenseSource("fc2", "x", 128, classes, kernels.For("fc2")), "\n");
  } else if (spec.architecture == "mlp") {
    m = torch::jit::Module("WeftMlp");
    m.register_attribute("training", c10::BoolType::get(), true);
    int64_t in = 1;
    for (int64_t d : sample_shape) in *= d;
    body = "    x = torch.flatten(x, 1)\n";
    const size_t layers = spec.hidden_units.size() + 1;
    for (size_t i = 0; i < layers; ++i) {
      const int64_t out = i + 1 < layers ? spec.hidden_units[i] : classes;
      const std::string name = absl::StrCat("fc", i + 1);
      AddLayer(m, name, *torch::nn::Linear(in, out));
      const std::string y = DenseSource(name, "x", in, out, kernels.For(name));
      absl::StrAppend(&body, i + 1 < layers ? absl::StrCat("    x = torch.relu(", y, ")\n")
                                            : absl::StrCat("    return ", y, "\n"));
      in = out;
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("model.architecture: unknown '",
                                                   spec.architecture, "' (cnn, mlp, torchscript)"));
  }
  m.define("def forward(self, x):\n" + body);
  return m;
}

ClassifierImpl::ClassifierImpl(torch::jit::Module module) : module_(std::move(module)) {
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

torch::Tensor ClassifierImpl::forward(torch::Tensor x) {
  torch::jit::GraphOptimizerEnabledGuard plain(false);
  return torch::log_softmax(module_.forward({std::move(x)}).toTensor(), 1);
}

void ClassifierImpl::train(bool on) {
  torch::nn::Module::train(on);
  module_.train(on);
}

void ClassifierImpl::Save(std::ostream& out) const { module_.save(out); }

torch::Tensor ClassifierImpl::Logits(const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  torch::jit::GraphOptimizerEnabledGuard plain(false);
  const bool was_training = is_training();
  train(false);
  torch::Tensor logits = module_.forward({x}).toTensor();
  train(was_training);
  return logits;
}

void LoadParameters(ClassifierImpl& model, torch::serialize::InputArchive& archive) {
  // Every tensor is checked before any is copied: a checkpoint of another model changes nothing.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (model's, archive's)
  auto find = [&archive](const std::string& name, const torch::Tensor& into) {
    torch::Tensor value;
    if (!archive.try_read(name, value)) {
      // Before the built-ins were TorchScript: <layer>/<weight|bias>, e.g. fc1/weight.
      const size_t cut = name.rfind('_');
      torch::serialize::InputArchive layer;
      TORCH_CHECK(cut != std::string::npos && archive.try_read(name.substr(0, cut), layer) &&
                      layer.try_read(name.substr(cut + 1), value),
                  "no tensor ", name, " in the archive");
    }
    TORCH_CHECK(value.sizes() == into.sizes(), name, " is ", value.sizes(), " in the archive, ",
                into.sizes(), " in the model");
    return value;
  };
  for (const auto& p : model.named_parameters(/*recurse=*/false)) {
    copies.emplace_back(p.value(), find(p.key(), p.value()));
  }
  for (const auto& b : model.named_buffers(/*recurse=*/false)) {
    copies.emplace_back(b.value(), find(b.key(), b.value()));
  }
  torch::NoGradGuard no_grad;
  for (auto& [into, value] : copies) into.copy_(value);
}

namespace {

absl::StatusOr<std::shared_ptr<ClassifierImpl>> LoadTorchScript(
    const std::string& model_dir, const std::vector<int64_t>& sample_shape, int64_t classes) {
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
  auto model = std::make_shared<ClassifierImpl>(std::move(module));
  bool trainable = false;
  for (const torch::Tensor& p : model->parameters()) trainable = trainable || p.requires_grad();
  if (!trainable) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.torchscript: none of its ", model->parameters().size(),
                     " parameters requires a gradient, so there is nothing to train"));
  }
  std::vector<int64_t> batch = {2};
  batch.insert(batch.end(), sample_shape.begin(), sample_shape.end());
  const std::string input = absl::StrCat("[", absl::StrJoin(batch, ", "), "]");
  try {
    torch::Tensor logits = model->Logits(torch::zeros(batch));
    if (logits.dim() != 2 || logits.size(0) != 2 || logits.size(1) != classes) {
      return absl::InvalidArgumentError(absl::StrCat("model.torchscript: forward maps ", input,
                                                     " to ", torch::str(logits.sizes()),
                                                     "; it must give logits [2, ", classes, "]"));
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return absl::InvalidArgumentError(
        absl::StrCat("model.torchscript: forward fails on ", input, " float32: ", what));
  }
  return model;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ClassifierImpl>> BuildModel(const ModelSpec& spec,
                                                           const std::string& model_dir,
                                                           const std::vector<int64_t>& sample_shape,
                                                           int64_t classes,
                                                           const LayerKernels& kernels) {
  if (spec.architecture == "torchscript") {
    return LoadTorchScript(model_dir, sample_shape, classes);
  }
  absl::StatusOr<torch::jit::Module> module =
      MakeBuiltinModule(spec, kernels, sample_shape, classes);
  if (!module.ok()) return module.status();
  return std::make_shared<ClassifierImpl>(*std::move(module));
}

}  // namespace weft::train
