// Image-classification data held in memory as tensors, loaded from IDX files.
#pragma once

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"

namespace weft::train {

// Fashion-MNIST's pixel mean and standard deviation over the training split (on [0, 1] values).
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

struct Dataset {
  torch::Tensor images;  // [N, 1, 28, 28] float32, (x/255 - mean) / std
  torch::Tensor labels;  // [N] int64, class ids 0..9
  int64_t size() const { return labels.size(0); }
};

// Loads split "train" (train-*-ubyte) or "test" (t10k-*-ubyte) from `dir`, the first `limit`
// samples when limit > 0. NotFound / InvalidArgument from ReadIdx, InvalidArgument when the
// image and label counts differ.
absl::StatusOr<Dataset> LoadDataset(const std::string& dir, const std::string& split,
                                    int64_t limit = 0);

}  // namespace weft::train
