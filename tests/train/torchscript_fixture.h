// A tenant's own model as TorchScript, made in C++ exactly as torch.jit.script would make it from
// Python: a module with parameters, a `training` attribute, and a forward over torch builtins
// (here a one-hidden-layer MLP with dropout, logits [N, 10] from [N, 1, 28, 28]).
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <string>

namespace weft::testing {

// `classes` other than 10 makes a module weft must refuse.
inline torch::jit::Module MakeTorchScriptMlp(int hidden = 64, int classes = 10, int seed = 1) {
  torch::manual_seed(seed);
  torch::jit::Module m("TenantNet");
  m.register_attribute("training", c10::BoolType::get(), true);
  // As nn.Parameter does: parameters require gradients.
  auto param = [](torch::Tensor t) { return t.set_requires_grad(true); };
  m.register_parameter("w1", param(torch::randn({hidden, 784}) * std::sqrt(2.0 / 784)), false);
  m.register_parameter("b1", param(torch::zeros({hidden})), false);
  m.register_parameter("w2", param(torch::randn({classes, hidden}) * std::sqrt(1.0 / hidden)),
                       false);
  m.register_parameter("b2", param(torch::zeros({classes})), false);
  m.define(R"(
    def forward(self, x):
        h = torch.relu(torch.matmul(torch.flatten(x, 1), self.w1.t()) + self.b1)
        h = torch.dropout(h, 0.1, self.training)
        return torch.matmul(h, self.w2.t()) + self.b2
  )");
  return m;
}

}  // namespace weft::testing
