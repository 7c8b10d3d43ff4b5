#include "train/dataset.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "train/idx.h"

namespace weft::train {

absl::StatusOr<Dataset> LoadDataset(const std::string& dir, const std::string& split,
                                    int64_t limit) {
  std::string prefix = split == "train" ? "train" : "t10k";
  ASSIGN_OR_RETURN(IdxArray images,
                   ReadIdx(absl::StrCat(dir, "/", prefix, "-images-idx3-ubyte"), limit));
  ASSIGN_OR_RETURN(IdxArray labels,
                   ReadIdx(absl::StrCat(dir, "/", prefix, "-labels-idx1-ubyte"), limit));
  if (images.dims.size() != 3 || labels.dims.size() != 1 || images.dims[0] != labels.dims[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("data in ", dir,
                     " is not an image-classification set: images and labels "
                     "of split ",
                     split, " do not match"));
  }
  Dataset d;
  int64_t n = images.dims[0];
  d.images =
      torch::from_blob(images.data.data(), {n, 1, images.dims[1], images.dims[2]}, torch::kUInt8)
          .to(torch::kFloat32)
          .div_(255.0)
          .sub_(kFashionMnistMean)
          .div_(kFashionMnistStd);
  d.labels = torch::from_blob(labels.data.data(), {n}, torch::kUInt8).to(torch::kInt64);
  return d;
}

}  // namespace weft::train
