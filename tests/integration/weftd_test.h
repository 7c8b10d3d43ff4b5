// The one fixture of the integration tests: a temporary directory, what the test needs checked
// (the data set, a container engine, a Slurm or PostgreSQL cluster), and a real weftd started on
// it, with the helpers every test uses to talk to it. A test's fixture derives from WeftdTest and
// says what it needs by overriding Options(); nothing else builds a weftd.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "executor/slurm_cluster.h"
#include "integration/weftd_process.h"
#include "store/pg_cluster.h"

namespace weft::testing {

// Where scripts/install-deps.sh installs Fashion-MNIST (IDX files, gzipped).
inline constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

// A small experiment: four trials of a small MLP on 2,000 images, two at once; ASHA with η = 2,
// rungs of 1 and 2 epochs. A few seconds a trial.
inline constexpr char kSmallExperiment[] = R"(kind: Experiment
name: small-search
job:
  model: {architecture: mlp, hidden_units: [32]}
  data: {train_samples: 2000, test_samples: 500}
  training: {epochs: 2, batch_size: 64, threads: 1}
  resources: {cpus: 1, memory_mb: 1024}
search:
  space:
    training.learning_rate: {loguniform: [1.0e-3, 3.0e-2]}
  eta: 2
  max_trials: 4
  max_concurrent_trials: 2
  seed: 3
)";

// What an integration test needs before it runs and how its weftd starts. A need that this
// machine does not meet skips the test and says how to meet it.
struct WeftdTestOptions {
  explicit WeftdTestOptions(std::string name = "weftd") : name(std::move(name)) {}

  std::string name;               // the directory is /tmp/weft-NAME-XXXXXX
  std::vector<std::string> args;  // weftd's flags
  std::vector<std::string> env;   // weftd's environment ("NAME=value"); learners inherit it
  std::string nodes;              // nodes.yaml's text; when set, weftd runs --config with it
  bool fashion_mnist = false;     // needs the data set installed
  bool containers = false;        // needs a container engine (not WEFT_TEST_RUNTIME=none)
  bool postgresql = false;        // a throwaway PostgreSQL cluster; weftd's store is in it
  int slurm_nodes = 0;            // a throwaway Slurm cluster of this many nodes; weftd uses it
  int slurm_cpus_per_node = 1;    //   each with this many cpus
  int slurm_gpus_per_node = 0;    //   and this many fake GPUs in its gres
  bool tls = false;               // weftd serves https with a self-signed certificate
  bool terminal = false;          // weftd has a pseudo-terminal (WeftdProcess::set_terminal)
  bool start = true;              // SetUp starts weftd; false: the test calls StartWeftd()
};

class WeftdTest : public ::testing::Test {
 protected:
  // This fixture's needs; a fixture overrides it.
  virtual WeftdTestOptions Options() const { return WeftdTestOptions(); }

  // Checks the needs (skipping the test when one is not met), makes the directory and the
  // clusters asked for, and starts weftd unless Options().start is false. A fixture that
  // overrides SetUp calls this first and returns if IsSkipped() or HasFatalFailure().
  void SetUp() override;
  // Stops weftd, then the clusters, and removes the directory.
  void TearDown() override;

  // Starts weftd_ (made by SetUp with the options) with `extra_args` added to its flags; a
  // fatal test failure with weftd's log when it does not come up.
  void StartWeftd(const std::vector<std::string>& extra_args = {});
  // A weftd (not yet started) on the directory's `data_subdir` with the options' flags and
  // environment (its store in PostgreSQL with Options().postgresql; its learners on Slurm
  // whenever slurm_ is set, even by the test itself), and `extra_args` and `extra_env` added:
  // for tests that run more than one weftd, or each on a fresh directory.
  std::unique_ptr<WeftdProcess> MakeWeftd(const std::string& data_subdir,
                                          const std::vector<std::string>& extra_args = {},
                                          const std::vector<std::string>& extra_env = {}) const;

  // Writes `text` to the directory's file `name`; its path.
  std::string Write(const std::string& name, const std::string& text) const;
  // Writes the manifest "name: NAME\n" + `body` to NAME.yaml; its path.
  std::string Manifest(const std::string& name, const std::string& body) const;
  // Writes the manifest (as Manifest) and submits it as tenant `default`: the job's id.
  std::string Submit(const std::string& name, const std::string& body) const;
  // `weft submit PATH [extra...]` as `token`: the job's id ("" and a test failure if refused).
  std::string SubmitAs(const std::string& token, const std::string& manifest_path,
                       const std::vector<std::string>& extra = {}) const;
  // NAME.tar.gz in the directory holding `files` (paths), each under its base name; its path.
  std::string Archive(const std::string& name, const std::vector<std::string>& files) const;
  // Makes tenant `name` (with `quota`, `weft tenant create --quota`'s text, if not empty) as
  // the admin and returns a new token of it.
  std::string NewTenant(const std::string& name, const std::string& quota = "") const;

  // GET `path` as `token` (token() when ""): the answer's JSON (null if none); its HTTP
  // status in `*status` (0 if weftd did not answer).
  nlohmann::json Get(const std::string& path, const std::string& token = "",
                     int* status = nullptr) const;
  // Polls job `id` as `token` (token() when "") until its state is one of `states`
  // (WeftdProcess::WaitForJob).
  nlohmann::json WaitFor(const std::string& id, const std::vector<std::string>& states,
                         int timeout_s, const std::string& token = "") const;
  // Polls job `id` until `done(job)` holds (WeftdProcess::WaitForJobWhere).
  nlohmann::json WaitUntil(const std::string& id,
                           const std::function<bool(const nlohmann::json&)>& done, int timeout_s,
                           const std::string& what) const;
  // Learner `rank`'s log (`weft logs ID --rank RANK`).
  std::string Log(const std::string& id, int rank) const;
  // Polls learner `rank`'s log until it has `text`; a test failure with the log after
  // `timeout_s`.
  void WaitForLog(const std::string& id, int rank, const std::string& text, int timeout_s) const;

  std::string dir_;  // the test's temporary directory; weftd's data is dir_/data
  std::unique_ptr<WeftdProcess> weftd_;
  std::unique_ptr<PgCluster> pg_;        // when Options().postgresql
  std::string store_uri_;                //   and weftd's --store in it
  std::unique_ptr<SlurmCluster> slurm_;  // when Options().slurm_nodes > 0
  std::string tls_cert_, tls_key_;       // when Options().tls: PEM files in dir_

 private:
  // The flags and environment the options give a weftd.
  std::vector<std::string> Args() const;
  std::vector<std::string> Env() const;
  WeftdTestOptions options_;
};

// WeftdTest for value-parameterized tests (TEST_P): GetParam() in Options() and the tests.
template <typename T>
class WeftdTestWithParam : public WeftdTest, public ::testing::WithParamInterface<T> {};

}  // namespace weft::testing
