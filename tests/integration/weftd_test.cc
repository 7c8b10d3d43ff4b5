#include "integration/weftd_test.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

namespace weft::testing {

using json = nlohmann::json;

void WeftdTest::SetUp() {
  options_ = Options();
  if (options_.fashion_mnist &&
      !std::filesystem::exists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (scripts/install-deps.sh installs it)";
  }
  if (const char* r = getenv("WEFT_TEST_RUNTIME");
      options_.containers && r != nullptr && std::string(r) == "none") {
    GTEST_SKIP() << "learners run without a container engine in this run (WEFT_TEST_RUNTIME=none)";
  }
  std::string why;
  if (options_.postgresql) {
    pg_ = PgCluster::Start(&why);
    if (pg_ == nullptr) GTEST_SKIP() << "no PostgreSQL here: " << why;
    store_uri_ = pg_->Database("weft");
    ASSERT_FALSE(store_uri_.empty());
  }
  if (options_.slurm_nodes > 0) {
    slurm_ = SlurmCluster::Start(options_.slurm_nodes, options_.slurm_cpus_per_node, &why,
                                 options_.slurm_gpus_per_node);
    if (slurm_ == nullptr) GTEST_SKIP() << "no Slurm cluster here: " << why;
  }
  std::string tmpl = "/tmp/weft-" + options_.name + "-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << tmpl << ": " << strerror(errno);
  dir_ = tmpl;
  if (!options_.nodes.empty()) Write("nodes.yaml", options_.nodes);
  if (options_.tls) {
    tls_cert_ = dir_ + "/cert.pem";
    tls_key_ = dir_ + "/key.pem";
    // Self-signed, for the address the clients and learners dial.
    auto made = RunCommand({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", tls_key_, "-out",
                            tls_cert_, "-days", "2", "-subj", "/CN=localhost", "-addext",
                            "subjectAltName=IP:127.0.0.1,DNS:localhost"});
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  weftd_ = MakeWeftd("data");
  if (options_.start) StartWeftd();
}

void WeftdTest::TearDown() {
  weftd_.reset();
  slurm_.reset();
  pg_.reset();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

std::vector<std::string> WeftdTest::Args() const {
  std::vector<std::string> args;
  if (!options_.nodes.empty()) args.insert(args.end(), {"--config", dir_ + "/nodes.yaml"});
  if (!store_uri_.empty()) args.insert(args.end(), {"--store", store_uri_});
  if (slurm_ != nullptr) args.insert(args.end(), {"--executor", "slurm"});
  args.insert(args.end(), options_.args.begin(), options_.args.end());
  return args;
}

std::vector<std::string> WeftdTest::Env() const {
  std::vector<std::string> env = options_.env;
  if (slurm_ != nullptr) env.push_back("SLURM_CONF=" + slurm_->conf());
  return env;
}

std::unique_ptr<WeftdProcess> WeftdTest::MakeWeftd(
    const std::string& data_subdir, const std::vector<std::string>& extra_args,
    const std::vector<std::string>& extra_env) const {
  auto w = std::make_unique<WeftdProcess>(dir_ + "/" + data_subdir);
  std::vector<std::string> args = Args(), env = Env();
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  w->set_args(args);
  w->set_env(env);
  if (options_.tls) w->set_tls(tls_cert_, tls_key_);
  w->set_terminal(options_.terminal);
  return w;
}

void WeftdTest::StartWeftd(const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = Args();
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  weftd_->set_args(args);
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
}

std::string WeftdTest::Write(const std::string& name, const std::string& text) const {
  const std::string path = dir_ + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string WeftdTest::Manifest(const std::string& name, const std::string& body) const {
  return Write(name + ".yaml", "name: " + name + "\n" + body);
}

std::string WeftdTest::Submit(const std::string& name, const std::string& body) const {
  return weftd_->Submit(Manifest(name, body));
}

std::string WeftdTest::SubmitAs(const std::string& token, const std::string& manifest_path,
                                const std::vector<std::string>& extra) const {
  std::vector<std::string> args = {"submit", manifest_path};
  args.insert(args.end(), extra.begin(), extra.end());
  CommandResult r = weftd_->CliAs(token, args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return SubmittedJobId(r.output);
}

std::string WeftdTest::Archive(const std::string& name,
                               const std::vector<std::string>& files) const {
  const std::string path = dir_ + "/" + name + ".tar.gz";
  std::vector<std::string> argv = {"/usr/bin/tar", "-czf", path};
  for (const std::string& f : files) {
    const std::filesystem::path p(f);
    argv.insert(argv.end(), {"-C", p.parent_path().string(), p.filename().string()});
  }
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return path;
}

std::string WeftdTest::NewTenant(const std::string& name, const std::string& quota) const {
  const std::string admin = weftd_->admin_token();
  std::vector<std::string> create = {"tenant", "create", name};
  if (!quota.empty()) create.insert(create.end(), {"--quota", quota});
  CommandResult c = weftd_->CliAs(admin, create);
  EXPECT_EQ(c.exit_code, 0) << c.output;
  CommandResult t = weftd_->CliAs(admin, {"token", "create", name});
  EXPECT_EQ(t.exit_code, 0) << t.output;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(t.output, m, std::regex("weft_[0-9a-f]{64}"))) << t.output;
  return m.empty() ? "" : m[0].str();
}

json WeftdTest::Get(const std::string& path, const std::string& token, int* status) const {
  auto r = weftd_->ClientAs(token.empty() ? weftd_->token() : token).Get(path);
  if (status != nullptr) *status = r ? r->status : 0;
  return r ? json::parse(r->body, nullptr, false) : json();
}

json WeftdTest::WaitFor(const std::string& id, const std::vector<std::string>& states,
                        int timeout_s, const std::string& token) const {
  return weftd_->WaitForJob(id, states, timeout_s, token);
}

json WeftdTest::WaitUntil(const std::string& id, const std::function<bool(const json&)>& done,
                          int timeout_s, const std::string& what) const {
  return weftd_->WaitForJobWhere(id, done, timeout_s, what);
}

std::string WeftdTest::Log(const std::string& id, int rank) const {
  return weftd_->LearnerLog(id, rank);
}

namespace {

// The last `lines` lines of `text`.
std::string Tail(const std::string& text, int lines) {
  size_t at = text.size();
  for (int n = 0; n <= lines && at != std::string::npos && at > 0; ++n) {
    at = text.rfind('\n', at - 1);
  }
  return at == std::string::npos ? text : text.substr(at + 1);
}

}  // namespace

void WeftdTest::WaitForLog(const std::string& id, int rank, const std::string& text,
                           int timeout_s) const {
  std::string log;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (true) {
    log = Log(id, rank);
    if (log.find(text) != std::string::npos) return;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // What every learner and weftd said last: why it did not happen is usually in another's log.
  std::string others;
  for (int other = 0; other < 16; ++other) {
    if (other == rank) continue;
    const std::string l = Log(id, other);
    if (!l.empty())
      others += "\n--- learner " + std::to_string(other) + " (tail) ---\n" + Tail(l, 12);
  }
  ADD_FAILURE() << "learner " << rank << " never logged '" << text << "':\n"
                << log << others << "\n--- weftd (tail) ---\n"
                << Tail(weftd_->log(), 40);
}

}  // namespace weft::testing
