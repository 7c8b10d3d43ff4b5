#include "train/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>

#include "train/dataset.h"

namespace weft::train {
namespace {

std::string IdxBytes(const std::vector<int>& dims, const std::vector<uint8_t>& data) {
  std::string s = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (int d : dims) {
    s += static_cast<char>((d >> 24) & 0xff);
    s += static_cast<char>((d >> 16) & 0xff);
    s += static_cast<char>((d >> 8) & 0xff);
    s += static_cast<char>(d & 0xff);
  }
  s.append(data.begin(), data.end());
  return s;
}

std::string TempPath(const std::string& name) {
  return "/tmp/weft-idx-" + std::to_string(::getpid()) + "-" + name;
}

void WritePlain(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

TEST(IdxTest, ReadsPlainAndGzippedAlike) {
  std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::string bytes = IdxBytes({3, 2, 2}, data);
  std::string plain = TempPath("plain");
  std::string gz = TempPath("gz");
  WritePlain(plain, bytes);
  WriteGz(gz + ".gz", bytes);
  for (const std::string& p : {plain, gz}) {
    auto a = ReadIdx(p);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{3, 2, 2}));
    EXPECT_EQ(a->data, data);
  }
  auto limited = ReadIdx(plain, 2);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->dims[0], 2);
  EXPECT_EQ(limited->data.size(), 8u);
  std::remove(plain.c_str());
  std::remove((gz + ".gz").c_str());
}

TEST(IdxTest, ErrorsSayWhatIsWrong) {
  EXPECT_TRUE(absl::IsNotFound(ReadIdx("/nonexistent/train-images-idx3-ubyte").status()));
  std::string bad = TempPath("bad");
  WritePlain(bad, "PK\x03\x04 not idx");
  auto s = ReadIdx(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(s.status()));
  EXPECT_NE(s.status().message().find("bad magic"), std::string::npos);
  std::string trunc = TempPath("trunc");
  WritePlain(trunc, IdxBytes({10, 28, 28}, std::vector<uint8_t>(100, 0)));
  auto t = ReadIdx(trunc);
  EXPECT_TRUE(absl::IsInvalidArgument(t.status()));
  EXPECT_NE(t.status().message().find("truncated"), std::string::npos);
  std::remove(bad.c_str());
  std::remove(trunc.c_str());
}

TEST(DatasetTest, LoadsFashionMnistWhenInstalled) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!ReadIdx(dir + "/t10k-labels-idx1-ubyte").ok()) GTEST_SKIP() << "dataset not installed";
  auto test = LoadDataset(dir, "test", 500);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->All().sizes(), (std::vector<int64_t>{500, 1, 28, 28}));
  EXPECT_EQ(test->labels.sizes(), (std::vector<int64_t>{500}));
  EXPECT_GE(test->labels.min().item<int64_t>(), 0);
  EXPECT_LE(test->labels.max().item<int64_t>(), 9);
  // Normalised pixels: background (0) maps to -mean/std.
  EXPECT_NEAR(test->All().min().item<double>(), -kFashionMnistMean / kFashionMnistStd, 1e-5);
  // Held as the file's bytes; a batch is normalised like the whole.
  EXPECT_EQ(test->stored.scalar_type(), torch::kUInt8);
  const torch::Tensor idx = torch::tensor({499, 3, 3}, torch::kInt64);
  EXPECT_EQ(test->Batch(idx).scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(test->Batch(idx), test->All().index_select(0, idx)));
  EXPECT_TRUE(torch::equal(test->Range(3, 4), test->All().slice(0, 3, 4)));
}

TEST(IdxTest, AHeaderThatClaimsTooMuchIsRefusedWithoutAllocatingIt) {
  // 4 dimensions of 2^31 - 1: the product overflows 64 bits; it used to be multiplied unchecked.
  std::string huge = TempPath("huge");
  WritePlain(huge, IdxBytes({0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff}, {1, 2, 3}));
  auto a = ReadIdx(huge);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("claims more than 68719476736 bytes"), std::string::npos)
      << a.status();
  // 2^31 images of one byte (2 GiB) with 3 bytes there: truncated, found without allocating the
  // 2 GiB it claims (it used to resize to the claim before reading).
  std::string lying = TempPath("lying");
  WritePlain(lying, IdxBytes({0x7fffffff}, {1, 2, 3}));
  auto b = ReadIdx(lying);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("is truncated"), std::string::npos) << b.status();
  std::remove(huge.c_str());
  std::remove(lying.c_str());
}

}  // namespace
}  // namespace weft::train
