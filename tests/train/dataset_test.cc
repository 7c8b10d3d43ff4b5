// The data set formats a learner reads (train/dataset.h): CSV with a header and a label column,
// and a torch.save'd dict of tensors; every malformed file is refused naming the file, and for
// CSV the line and column.
#include "train/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>
#include <fstream>

namespace weft::train {
namespace {

using ::testing::HasSubstr;

class DatasetFormatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-dataset-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
  }
  std::string Problem(const std::string& split, const std::string& format) {
    auto d = LoadDataset(dir_, split, 0, format);
    EXPECT_FALSE(d.ok());
    return std::string(d.status().message());
  }
  std::string dir_;
};

TEST_F(DatasetFormatsTest, CsvGivesFeaturesAndLabelsAsWritten) {
  Write("train.csv", "width,height,label\n1.5,2,0\n-3,4e1,2\r\n\n5, 6 ,1\n");
  Write("test.csv", "width,height,label\n0,0,3\n");
  auto train = LoadDataset(dir_, "train", 0, "csv");
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->All().sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(train->SampleShape(), (std::vector<int64_t>{2}));
  EXPECT_TRUE(torch::equal(train->All(),
                           torch::tensor({1.5f, 2.0f, -3.0f, 40.0f, 5.0f, 6.0f}).view({3, 2})));
  EXPECT_TRUE(torch::equal(train->labels, torch::tensor({0, 2, 1}, torch::kInt64)));
  EXPECT_EQ(LoadDataset(dir_, "train", 2, "csv")->size(), 2);
  auto test = LoadDataset(dir_, "test", 0, "csv");
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(NumClasses(*train, *test), 4);
}

TEST_F(DatasetFormatsTest, ABrokenCsvIsRefusedNamingTheLineAndColumn) {
  Write("train.csv", "a,b,label\n1,2,0\n1,x,1\n");
  EXPECT_THAT(Problem("train", "csv"),
              HasSubstr("train.csv line 3: column 2 (b) is not a finite number: 'x'"));
  Write("train.csv", "a,b,label\n1,2\n");
  EXPECT_THAT(Problem("train", "csv"), HasSubstr("line 2: 2 columns; the header has 3"));
  Write("train.csv", "a,b,label\n1,2,-1\n");
  EXPECT_THAT(Problem("train", "csv"), HasSubstr("label '-1' is not a class id in [0, 10000)"));
  Write("train.csv", "a,b,class\n1,2,0\n");
  EXPECT_THAT(Problem("train", "csv"), HasSubstr("last column must be `label`"));
  Write("train.csv", "a,label\n");
  EXPECT_THAT(Problem("train", "csv"), HasSubstr("no rows after the header"));
  Write("train.csv", "a,label\nnan,1\n");
  EXPECT_THAT(Problem("train", "csv"), HasSubstr("not a finite number: 'nan'"));
  // Finite as a double, infinite as the float32 it would become.
  Write("train.csv", "a,label\n1e300,1\n");
  EXPECT_THAT(Problem("train", "csv"), HasSubstr("not a finite number: '1e300'"));
  auto missing = LoadDataset(dir_, "test", 0, "csv");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
}

TEST_F(DatasetFormatsTest, TensorsComeFromADictOfTheTwoSplits) {
  c10::Dict<std::string, torch::Tensor> dict;
  dict.insert("train_x", torch::arange(24, torch::kInt32).view({4, 2, 3}));
  dict.insert("train_y", torch::tensor({0, 1, 2, 1}, torch::kInt16));
  dict.insert("test_x", torch::zeros({2, 2, 3}, torch::kFloat64));
  dict.insert("test_y", torch::tensor({1, 0}, torch::kInt64));
  std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  Write("data.pt", std::string(bytes.begin(), bytes.end()));
  auto train = LoadDataset(dir_, "train", 3, "tensors");
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->All().scalar_type(), torch::kFloat32);
  EXPECT_EQ(train->All().sizes(), (std::vector<int64_t>{3, 2, 3}));
  EXPECT_EQ(train->All()[2][1][2].item<float>(), 17.0f);
  EXPECT_TRUE(torch::equal(train->labels, torch::tensor({0, 1, 2}, torch::kInt64)));
  EXPECT_EQ(LoadDataset(dir_, "test", 0, "tensors")->size(), 2);

  c10::Dict<std::string, torch::Tensor> bad;
  bad.insert("train_x", torch::zeros({3, 2}));
  bad.insert("train_y", torch::zeros({3}));  // float class ids
  bytes = torch::pickle_save(c10::IValue(bad));
  Write("data.pt", std::string(bytes.begin(), bytes.end()));
  EXPECT_THAT(Problem("train", "tensors"), HasSubstr("train_y must be integer class ids [N]"));
  EXPECT_THAT(Problem("test", "tensors"), HasSubstr("has no tensors 'test_x' and 'test_y'"));
  Write("data.pt", "not a pickle");
  EXPECT_THAT(Problem("train", "tensors"), HasSubstr("not a file of torch.save"));
  EXPECT_THAT(Problem("train", "parquet"), HasSubstr("unknown data format 'parquet'"));
}

}  // namespace
}  // namespace weft::train
