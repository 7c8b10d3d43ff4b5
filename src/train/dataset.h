// Classification data held in memory as tensors, loaded from a data set's directory in one of
// the formats the admin may register (control/datasets.h DatasetFormats):
//   idx:     MNIST's four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
//            t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each plain or .gz); samples
//            [N, 1, 28, 28] float32, (pixel/255 - 0.2860) / 0.3530, held as the file's uint8
//            pixels and normalised a batch at a time (a quarter of the memory, 188 -> 47 MB for
//            the training split, and no 0.6 s conversion when a learner starts or joins);
//   csv:     train.csv and test.csv: a header row, then one row per sample of F numeric feature
//            columns and a last column named `label` holding the class id (an integer in
//            [0, kMaxClasses)); samples [N, F] float32 as written;
//   tensors: data.pt, written by torch.save of a dict {"train_x", "train_y", "test_x",
//            "test_y"}: x any numeric dtype [N, ...] (as float32), y an integer dtype [N] of class
//            ids.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::train {

// Fashion-MNIST's pixel mean and standard deviation over the training split (on [0, 1] values).
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

// The most classes a data set may have, and the most rows a CSV file may hold.
inline constexpr int64_t kMaxClasses = 10000;
inline constexpr int64_t kMaxCsvRows = 10'000'000;

struct Dataset {
  // [N, ...] as held: uint8 pixels for idx, float32 for csv and tensors. Read samples through
  // Batch/Range/All, which give them as the model sees them.
  torch::Tensor stored;
  torch::Tensor labels;  // [N] int64, class ids in [0, kMaxClasses)
  int64_t size() const { return labels.size(0); }
  // Samples idx ([B] int64 positions) as float32 [B, ...], normalised as above.
  torch::Tensor Batch(const torch::Tensor& idx) const;
  // Samples [begin, end) as float32 [end - begin, ...].
  torch::Tensor Range(int64_t begin, int64_t end) const;
  // Every sample as float32 [N, ...].
  torch::Tensor All() const { return Range(0, size()); }
  // One sample's shape: [1, 28, 28] for idx, [F] for csv.
  std::vector<int64_t> SampleShape() const;
};

// Loads split "train" or "test" of the data set in `dir`, stored as `format` (idx, csv,
// tensors), the first `limit` samples when limit > 0. NotFound when a file is missing;
// InvalidArgument, naming the file (and for CSV the line and column), when its content is not
// of the format, samples and labels differ in number, or a class id is out of range.
absl::StatusOr<Dataset> LoadDataset(const std::string& dir, const std::string& split,
                                    int64_t limit = 0, const std::string& format = "idx");

// How many classes `train` and `test` hold between them: the largest class id plus one (at
// least 2).
int64_t NumClasses(const Dataset& train, const Dataset& test);

}  // namespace weft::train
