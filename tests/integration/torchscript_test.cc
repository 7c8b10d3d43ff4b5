// A tenant's own model, end to end through a real weftd, the real CLI and a real learner: a
// TorchScript module uploaded with the manifest trains on Fashion-MNIST to the smoke accuracy,
// and the delivered model comes back as TorchScript that PyTorch (Debian's python3-torch) loads and
// runs to the same logits as libtorch; so do the built-ins' delivered and final models.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "integration/weftd_test.h"
#include "job/job_spec.h"
#include "nlohmann/json.hpp"
#include "train/dataset.h"
#include "train/torchscript_fixture.h"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

class TorchScriptTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    return testing::WeftdTestOptions("torchscript");
  }

  // Downloads job `id`'s `kind` model with the CLI, runs it on 16 test images in libtorch and in
  // PyTorch (Debian's python3-torch), and expects the same logits [16, 10] (1e-5).
  void ExpectPyTorchRunsLikeLibtorch(const std::string& id, const std::string& kind) {
    const std::string model = dir_ + "/" + id + "-" + kind + ".pt";
    auto dl = weftd_->Cli({"download", id, "--" + kind, "-o", model});
    ASSERT_EQ(dl.exit_code, 0) << dl.output;
    torch::jit::Module module = torch::jit::load(model);
    module.eval();
    auto test = train::LoadDataset(kDefaultDataPath, "test", 16);
    ASSERT_TRUE(test.ok()) << test.status();
    torch::NoGradGuard no_grad;
    torch::Tensor logits = module.forward({test->All()}).toTensor();
    ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{16, 10}));

    const std::string inputs = dir_ + "/inputs.pt", outputs = dir_ + "/outputs.pt";
    {
      std::vector<char> bytes = torch::pickle_save(test->All());
      std::ofstream(inputs, std::ios::binary).write(bytes.data(), bytes.size());
    }
    auto py = testing::RunCommand(
        {"/usr/bin/python3", "-c",
         "import sys, torch\n"
         "m = torch.jit.load(sys.argv[1]); m.eval()\n"
         "with torch.no_grad(): torch.save(m(torch.load(sys.argv[2])), sys.argv[3])\n",
         model, inputs, outputs});
    ASSERT_EQ(py.exit_code, 0) << "python3-torch (scripts/install-deps.sh installs it): "
                               << py.output;
    std::ifstream in(outputs, std::ios::binary);
    std::vector<char> out_bytes((std::istreambuf_iterator<char>(in)), {});
    torch::Tensor python_logits = torch::pickle_load(out_bytes).toTensor();
    EXPECT_LT((python_logits - logits).abs().max().item<double>(), 1e-5) << kind;
  }
};

TEST_F(TorchScriptTest, ATenantsModelTrainsAndComesBackAsTorchScriptThatPyTorchRuns) {
  const std::string net = dir_ + "/net.pt";
  testing::MakeTorchScriptMlp(64).save(net);
  const std::string manifest =
      Write("own.yaml",
            "name: own\nmodel: {torchscript: net.pt}\n"
            "data: {train_samples: 6000, test_samples: 1000}\n"
            "training: {epochs: 2, threads: 1}\nresources: {cpus: 1}\ntargets: {deliver: 0.6}\n");
  // Naming an artifact the tenant does not have is refused at submission, naming the field.
  auto missing = weftd_->Cli({"submit", manifest});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr("model.torchscript: no artifact 'net.pt'"));

  auto submit = weftd_->Cli({"submit", manifest, "--upload", "net.pt=" + net, "--follow"}, 300);
  ASSERT_EQ(submit.exit_code, 0) << submit.output << weftd_->log();
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(submit.output, m, std::regex("job (job-[0-9a-z]+-[0-9a-z]+) submitted")));
  const std::string id = m[1];
  auto show = weftd_->Client().Get("/v1/jobs/" + id);
  ASSERT_TRUE(show);
  json job = json::parse(show->body);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump(2);
  EXPECT_EQ(job["spec"]["model"]["torchscript"], "net.pt");
  EXPECT_GE(job["models"]["final"]["test_accuracy"].get<double>(), 0.75);
  // The job keeps the content it was submitted with, whatever becomes of the artifact.
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/data/jobs/" + id + "/model/model.torchscript.pt"));

  ExpectPyTorchRunsLikeLibtorch(id, "delivered");
}

TEST_F(TorchScriptTest, TheBuiltInsComeBackAsTorchScriptThatPyTorchRunsToo) {
  const std::string manifest =
      Write("cnn.yaml",
            "name: cnn\nmodel: {architecture: cnn}\n"
            "data: {train_samples: 3000, test_samples: 500}\n"
            "training: {epochs: 1, threads: 1}\nresources: {cpus: 1}\ntargets: {deliver: 0.3}\n");
  auto submit = weftd_->Cli({"submit", manifest, "--follow"}, 300);
  ASSERT_EQ(submit.exit_code, 0) << submit.output << weftd_->log();
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(submit.output, m, std::regex("job (job-[0-9a-z]+-[0-9a-z]+) submitted")));
  for (const std::string kind : {"delivered", "final"}) ExpectPyTorchRunsLikeLibtorch(m[1], kind);
}

}  // namespace
}  // namespace weft
