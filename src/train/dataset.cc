#include "train/dataset.h"

#include <torch/script.h>

#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/text.h"
#include "job/layout.h"
#include "train/csv.h"
#include "train/idx.h"

namespace weft::train {
namespace {

absl::StatusOr<Dataset> LoadIdx(const std::string& dir, const std::string& split, int64_t limit) {
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
  // The tensor takes the file's bytes over rather than copying them.
  auto* pixels = new std::vector<uint8_t>(std::move(images.data));
  d.stored = torch::from_blob(
      pixels->data(), {n, 1, images.dims[1], images.dims[2]}, [pixels](void*) { delete pixels; },
      torch::kUInt8);
  d.labels = torch::from_blob(labels.data.data(), {n}, torch::kUInt8).to(torch::kInt64);
  return d;
}

absl::StatusOr<Dataset> LoadCsv(const std::string& dir, const std::string& split, int64_t limit) {
  const std::string path = absl::StrCat(dir, "/", split, ".csv");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("data file not found: ", path));
  ASSIGN_OR_RETURN(CsvTable t, ParseCsv(in, path, limit, kMaxCsvRows, kMaxClasses));
  const auto n = static_cast<int64_t>(t.labels.size());
  Dataset d;
  d.stored = torch::from_blob(t.samples.data(), {n, t.features}, torch::kFloat32).clone();
  d.labels = torch::from_blob(t.labels.data(), {n}, torch::kInt64).clone();
  return d;
}

absl::StatusOr<Dataset> LoadTensors(const std::string& dir, const std::string& split,
                                    int64_t limit) {
  const std::string path = TensorFilePath(dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("data file not found: ", path));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  auto bad = [&path](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  c10::IValue loaded;
  try {
    loaded = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return bad(absl::StrCat("not a file of torch.save: ", what.substr(0, what.find('\n'))));
  }
  if (!loaded.isGenericDict()) return bad("must hold a dict of tensors (torch.save({...}))");
  const c10::impl::GenericDict dict = loaded.toGenericDict();
  auto get = [&dict](const std::string& key) -> torch::Tensor {
    for (const auto& entry : dict) {
      if (entry.key().isString() && entry.key().toStringRef() == key && entry.value().isTensor()) {
        return entry.value().toTensor();
      }
    }
    return {};
  };
  torch::Tensor x = get(split + "_x"), y = get(split + "_y");
  if (!x.defined() || !y.defined()) {
    return bad(absl::StrCat("has no tensors '", split, "_x' and '", split, "_y'"));
  }
  if (x.dim() < 2 || x.is_complex() || x.scalar_type() == torch::kBool) {
    return bad(absl::StrCat(split, "_x must be real numbers [N, ...], is ", x.toString(), " ",
                            torch::str(x.sizes())));
  }
  if (y.dim() != 1 || torch::isFloatingType(y.scalar_type()) || y.scalar_type() == torch::kBool ||
      y.size(0) != x.size(0)) {
    return bad(absl::StrCat(split, "_y must be integer class ids [N] with N = ", x.size(0), ", is ",
                            y.toString(), " ", torch::str(y.sizes())));
  }
  Dataset d;
  const int64_t n = limit > 0 ? std::min(limit, x.size(0)) : x.size(0);
  d.stored = x.slice(0, 0, n).to(torch::kFloat32).contiguous();
  d.labels = y.slice(0, 0, n).to(torch::kInt64).contiguous();
  if (n == 0) return bad(absl::StrCat(split, "_x holds no samples"));
  if (!torch::isfinite(d.stored).all().item<bool>()) {
    return bad(absl::StrCat(split, "_x holds a value that is not finite"));
  }
  if (d.labels.min().item<int64_t>() < 0 || d.labels.max().item<int64_t>() >= kMaxClasses) {
    return bad(absl::StrCat(split, "_y holds a class id outside [0, ", kMaxClasses, ")"));
  }
  return d;
}

// Pixels as the model sees them (dataset.h); float32 samples as they are.
torch::Tensor Normalised(torch::Tensor x) {
  if (x.scalar_type() != torch::kUInt8) return x;
  return x.to(torch::kFloat32).div_(255.0).sub_(kFashionMnistMean).div_(kFashionMnistStd);
}

}  // namespace

torch::Tensor Dataset::Batch(const torch::Tensor& idx) const {
  return Normalised(stored.index_select(0, idx));
}

torch::Tensor Dataset::Range(int64_t begin, int64_t end) const {
  return Normalised(stored.slice(0, begin, end));
}

std::vector<int64_t> Dataset::SampleShape() const {
  auto sizes = stored.sizes();
  return {sizes.begin() + 1, sizes.end()};
}

absl::StatusOr<Dataset> LoadDataset(const std::string& dir, const std::string& split, int64_t limit,
                                    const std::string& format) {
  if (format == "csv") return LoadCsv(dir, split, limit);
  if (format == "tensors") return LoadTensors(dir, split, limit);
  if (format == "idx") return LoadIdx(dir, split, limit);
  return absl::InvalidArgumentError(absl::StrCat("unknown data format '", format, "'"));
}

int64_t NumClasses(const Dataset& train, const Dataset& test) {
  int64_t top = train.labels.max().item<int64_t>();
  if (test.size() > 0) top = std::max(top, test.labels.max().item<int64_t>());
  return std::max<int64_t>(2, top + 1);
}

}  // namespace weft::train
