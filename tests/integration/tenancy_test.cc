// Tenancy through a real weftd: tokens, isolation on every endpoint, quotas and a preemption by a
// higher-priority job with real learners that checkpoint and resume.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_test.h"
#include "job/job_spec.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class TenancyTest : public testing::WeftdTest {
 protected:
  // One node of 2 cpus, whatever this machine has, so quotas and preemption are deterministic.
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("tenancy");
    o.nodes = "nodes:\n  - {name: n1, cpus: 2, memory_mb: 8192}\n";
    return o;
  }
  void SetUp() override {
    WeftdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    admin_ = weftd_->admin_token();
    ASSERT_EQ(admin_.rfind("weft_", 0), 0u);
  }

  std::string admin_;
};

const char kQuickBody[] =
    "model: {architecture: mlp, hidden_units: [32]}\n"
    "data: {dataset: fashion-mnist, train_samples: 2000, test_samples: 500}\n"
    "training: {epochs: 1, batch_size: 64, threads: 1}\n";
const std::string kQuick = std::string(kQuickBody) + "resources: {cpus: 1, memory_mb: 512}\n";

TEST_F(TenancyTest, EveryEndpointIsolatesTenantsAndTokensAreStoredOnlyAsDigests) {
  const std::string a = NewTenant("team-a"), b = NewTenant("team-b");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  const std::string id = SubmitAs(a, Manifest("a-job", kQuick));
  ASSERT_FALSE(id.empty());

  struct Call {
    std::string method, path;
  };
  const std::vector<Call> job_calls = {
      {"GET", "/v1/jobs/ID"},         {"DELETE", "/v1/jobs/ID"},      {"POST", "/v1/jobs/ID/halt"},
      {"POST", "/v1/jobs/ID/resume"}, {"GET", "/v1/jobs/ID/metrics"}, {"GET", "/v1/jobs/ID/model"},
      {"GET", "/v1/jobs/ID/logs"},
  };
  auto call = [&](const std::string& token, const Call& c, const std::string& job) {
    std::string path = std::regex_replace(c.path, std::regex("ID"), job);
    auto cl = weftd_->ClientAs(token);
    httplib::Result r = c.method == "GET"    ? cl.Get(path)
                        : c.method == "POST" ? cl.Post(path, "", "application/json")
                                             : cl.Delete(path);
    return std::make_pair(r ? r->status : 0, r ? r->body : std::string());
  };
  for (const Call& c : job_calls) {
    // Tenant b on a's job answers exactly as on a job that does not exist.
    auto theirs = call(b, c, id);
    auto missing = call(b, c, "job-0000000000-none");
    EXPECT_EQ(theirs.first, 404) << c.method << " " << c.path << ": " << theirs.second;
    EXPECT_EQ(std::regex_replace(theirs.second, std::regex(id), "X"),
              std::regex_replace(missing.second, std::regex("job-0000000000-none"), "X"))
        << c.method << " " << c.path;
    EXPECT_EQ(call("", c, id).first, 401) << c.method << " " << c.path;
    EXPECT_EQ(call("weft_" + std::string(64, '0'), c, id).first, 401) << c.method << " " << c.path;
  }
  // Lists and views show b nothing of a.
  int status = 0;
  EXPECT_THAT(Get("/v1/jobs", b, &status).dump(), ::testing::Not(HasSubstr(id)));
  EXPECT_EQ(status, 200);
  EXPECT_THAT(Get("/v1/queue", b).dump(), ::testing::Not(HasSubstr(id)));
  EXPECT_THAT(Get("/v1/nodes", b).dump(), ::testing::Not(HasSubstr(id)));
  EXPECT_THAT(Get("/v1/jobs", a).dump(), HasSubstr(id));
  // Tenants may not use admin routes; the admin may not own jobs.
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/tenants"},
           {"POST", "/v1/tenants"},
           {"GET", "/v1/tenants/team-a"},
           {"PATCH", "/v1/tenants/team-a"},
           {"DELETE", "/v1/tenants/team-b"},
           {"POST", "/v1/tenants/team-b/tokens"},
           {"GET", "/v1/tenants/team-b/tokens"},
           {"DELETE", "/v1/tenants/team-b/tokens/tok-x"}}) {
    auto cl = weftd_->ClientAs(b);
    httplib::Result r = method == "GET"     ? cl.Get(path)
                        : method == "POST"  ? cl.Post(path, "{}", "application/json")
                        : method == "PATCH" ? cl.Patch(path, "{}", "application/json")
                                            : cl.Delete(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << method << " " << path;
    auto none = weftd_->ClientAs("").Get("/v1/tenants");
    EXPECT_EQ(none->status, 401);
  }
  auto admin_submit = weftd_->ClientAs(admin_).Post("/v1/jobs", kQuick, "application/yaml");
  EXPECT_EQ(admin_submit->status, 403);
  // The admin sees every tenant's job; deleting a tenant that owns jobs is refused.
  EXPECT_THAT(Get("/v1/jobs", admin_).dump(), HasSubstr(id));
  auto del = weftd_->CliAs(admin_, {"tenant", "delete", "team-a"});
  EXPECT_NE(del.exit_code, 0);
  EXPECT_THAT(del.output, HasSubstr("still owns 1 job"));
  // A revoked token stops working at once.
  auto list = Get("/v1/tenants/team-b/tokens", admin_);
  ASSERT_EQ(list["tokens"].size(), 1u);
  std::string tok_id = list["tokens"][0]["id"];
  EXPECT_EQ(weftd_->CliAs(admin_, {"token", "revoke", "team-b", tok_id}).exit_code, 0);
  Get("/v1/jobs", b, &status);
  EXPECT_EQ(status, 401);

  // No token is in the store in clear; the admin token file is private.
  std::string bytes;
  for (const char* f : {"/weft.db", "/weft.db-wal"}) {
    std::ifstream in(dir_ + "/data" + f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes += ss.str();
  }
  ASSERT_FALSE(bytes.empty());
  for (const std::string& t : {a, b, admin_}) EXPECT_EQ(bytes.find(t), std::string::npos);
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/data/admin.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
}

TEST_F(TenancyTest, QuotaHoldsAJobBackAndAHighPriorityJobPreemptsALowOneThatResumes) {
  if (!std::filesystem::exists(std::string(kDefaultDataPath) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed";
  }
  // Quota: team-q may use 1 cpu; its second 1-cpu job waits with the reason.
  const std::string q = NewTenant("team-q", "cpus=1,memory=4GiB");
  const std::string slow =
      "model: {architecture: mlp, hidden_units: [256, 128]}\n"
      "data: {dataset: fashion-mnist, train_samples: 30000, test_samples: 1000}\n"
      "training: {epochs: 8, batch_size: 32, threads: 1}\n"
      "checkpoint: {every_steps: 200}\n";
  const std::string q1 =
      SubmitAs(q, Manifest("q1", slow + "resources: {cpus: 1, memory_mb: 1024}\n"));
  const std::string q2 =
      SubmitAs(q, Manifest("q2", slow + "resources: {cpus: 1, memory_mb: 1024}\n"));
  WaitFor(q1, {"RUNNING"}, 60, q);
  json queue;
  for (int i = 0; i < 50; ++i) {
    queue = Get("/v1/queue", q);
    if (queue["queue"].size() == 1 &&
        queue["queue"][0].value("reason", "").find("quota") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(queue["queue"].size(), 1u) << queue.dump(2);
  EXPECT_EQ(queue["queue"][0]["id"], q2);
  EXPECT_EQ(queue["queue"][0]["reason"], "waiting: tenant quota cpus 1/1");
  EXPECT_EQ(queue["queue"][0]["code"], "quota");
  json waiting = Get("/v1/jobs/" + q2, q);
  EXPECT_EQ(waiting["waiting_code"], "quota") << waiting.dump(2);
  weftd_->CliAs(q, {"delete", q1});
  weftd_->CliAs(q, {"delete", q2});

  // Preemption: team-p's low-priority job fills the node; its high-priority job takes it over.
  const std::string p = NewTenant("team-p");
  const std::string low =
      SubmitAs(p, Manifest("low", slow + "priority: low\nresources: {cpus: 2, memory_mb: 1024}\n"));
  WaitFor(low, {"RUNNING"}, 60, p);
  // Let it write a checkpoint or two before it is preempted.
  for (int i = 0; i < 150 && Get("/v1/jobs/" + low, p)["progress"].value("step", 0) < 450; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const std::string urgent =
      SubmitAs(p, Manifest("urgent", std::string(kQuickBody) +
                                         "priority: high\nresources: {cpus: 2, memory_mb: 512}\n"));
  WaitFor(urgent, {"COMPLETED"}, 120, p);
  json done = WaitFor(low, {"COMPLETED"}, 400, p);
  std::string history = done["history"].dump();
  EXPECT_THAT(history, HasSubstr("PREEMPTED"));
  EXPECT_THAT(history, HasSubstr("requeued after preemption"));
  EXPECT_THAT(history, ::testing::Not(HasSubstr("FAILED")));
  auto logs = weftd_->CliAs(p, {"logs", low});
  EXPECT_THAT(logs.output, HasSubstr("resumed from"));
}

TEST_F(TenancyTest, TheJobListComesInPagesOfTheCallersJobs) {
  // A quota no job fits: everything stays queued and nothing trains.
  const std::string a = NewTenant("team-a", "cpus=0.5"), b = NewTenant("team-b");
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(SubmitAs(a, Manifest("j" + std::to_string(i), kQuick)));
  const std::string theirs = SubmitAs(b, Manifest("theirs", kQuick));
  int status = 0;
  json page = Get("/v1/jobs?limit=2", a, &status);
  ASSERT_EQ(status, 200) << page.dump(2);
  ASSERT_EQ(page["jobs"].size(), 2u);
  EXPECT_EQ(page["jobs"][0]["id"], ids[0]);
  EXPECT_EQ(page.value("next", ""), ids[1]);
  page = Get("/v1/jobs?limit=2&after=" + ids[1], a, &status);
  ASSERT_EQ(page["jobs"].size(), 1u);
  EXPECT_EQ(page["jobs"][0]["id"], ids[2]);
  EXPECT_FALSE(page.contains("next")) << "the last page says so";
  // Bad paging is a 400 naming the parameter; another tenant's job is no cursor.
  page = Get("/v1/jobs?limit=0", a, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(page["error"]["details"][0]["field"], "limit");
  Get("/v1/jobs?after=" + theirs, a, &status);
  EXPECT_EQ(status, 404);
  // The CLI walks every page.
  auto list = weftd_->CliAs(a, {"list"});
  EXPECT_EQ(list.exit_code, 0) << list.output;
  for (const auto& id : ids) EXPECT_THAT(list.output, HasSubstr(id));
  EXPECT_THAT(list.output, ::testing::Not(HasSubstr(theirs)));
}

TEST_F(TenancyTest, DataSetsAreTheAdminsToGrantAndATenantTrainsOnlyOnItsOwn) {
  if (!std::filesystem::exists(std::string(kDefaultDataPath) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed";
  }
  // A data set of the vision team's: Fashion-MNIST's files under another directory. Linked
  // symbolically first, which a learner's container could not follow: refused, saying so.
  const std::string scans = dir_ + "/scans";
  std::filesystem::create_directory(scans);
  std::filesystem::permissions(scans, std::filesystem::perms::owner_all |
                                          std::filesystem::perms::others_read |
                                          std::filesystem::perms::others_exec);
  for (const auto& f : std::filesystem::directory_iterator(kDefaultDataPath)) {
    std::filesystem::create_symlink(f.path(), scans + "/" + f.path().filename().string());
  }
  auto linked =
      weftd_->CliAs(admin_, {"dataset", "add", "scans", "--path", scans, "--tenants", "vision"});
  EXPECT_EQ(linked.exit_code, 1) << linked.output;
  EXPECT_THAT(linked.output, HasSubstr("is a symbolic link"));
  for (const auto& f : std::filesystem::directory_iterator(kDefaultDataPath)) {
    const std::string to = scans + "/" + f.path().filename().string();
    std::filesystem::remove(to);
    std::filesystem::copy_file(f.path(), to);
  }
  const std::string vision = NewTenant("vision"), nlp = NewTenant("nlp");
  auto refused =
      weftd_->CliAs(vision, {"dataset", "add", "mine", "--path", scans, "--tenants", "vision"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("admin"));
  auto bad = weftd_->CliAs(admin_, {"dataset", "add", "etc", "--path", "/etc", "--tenants", "all"});
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("path: '/etc' has no train-images-idx3-ubyte[.gz]"));
  auto add =
      weftd_->CliAs(admin_, {"dataset", "add", "scans", "--path", scans, "--tenants", "vision"});
  ASSERT_EQ(add.exit_code, 0) << add.output;
  EXPECT_THAT(add.output, HasSubstr("data set scans registered: " + scans +
                                    " (idx), for "
                                    "tenants vision"));

  // Each tenant lists what it may use, without paths; weftd registered Debian's for everyone.
  auto listed = weftd_->CliAs(vision, {"dataset", "list"});
  EXPECT_THAT(listed.output, HasSubstr("fashion-mnist"));
  EXPECT_THAT(listed.output, HasSubstr("scans"));
  EXPECT_THAT(listed.output, Not(HasSubstr(scans)));
  EXPECT_THAT(weftd_->CliAs(nlp, {"dataset", "list"}).output, Not(HasSubstr("scans")));
  EXPECT_THAT(weftd_->CliAs(admin_, {"dataset", "list"}).output, HasSubstr(scans));

  // Another tenant's data set is refused at submission, naming the field; so is any host path.
  const std::string body =
      "model: {architecture: mlp, hidden_units: [32]}\n"
      "data: {dataset: scans, train_samples: 2000, test_samples: 500}\n"
      "training: {epochs: 1, batch_size: 64, threads: 1}\nresources: {cpus: 1, memory_mb: 512}\n";
  auto other = weftd_->CliAs(nlp, {"submit", Manifest("nlp-scans", body)});
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_THAT(other.output, HasSubstr("data.dataset: no data set 'scans'"));
  auto path =
      weftd_->CliAs(vision, {"submit", Manifest("by-path",
                                                "model: {architecture: mlp}\n"
                                                "data: {path: /usr/share/datasets/fashion-mnist}\n"
                                                "training: {epochs: 1}\n")});
  EXPECT_EQ(path.exit_code, 1) << path.output;
  EXPECT_THAT(path.output, HasSubstr("data.path: is no longer accepted"));

  // The owner's job trains from it.
  const std::string id = SubmitAs(vision, Manifest("vision-scans", body));
  ASSERT_FALSE(id.empty());
  json done = WaitFor(id, {"COMPLETED"}, 180, vision);
  EXPECT_EQ(done["spec"]["data"]["dataset"], "scans");
  EXPECT_GE(done["models"]["final"]["test_accuracy"].get<double>(), 0.5);
}

// Three well-separated clusters of 8 features, `n` rows a class, as CSV with a header.
std::string BlobsCsv(int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> noise(0, 1);
  std::ostringstream csv;
  csv << "f1,f2,f3,f4,f5,f6,f7,f8,label\n";
  for (int i = 0; i < n; ++i) {
    for (int label = 0; label < 3; ++label) {
      for (int f = 0; f < 8; ++f) csv << (f % 3 == label ? 4.0 : 0.0) + noise(gen) << ",";
      csv << label << "\n";
    }
  }
  return csv.str();
}

// A tensor file as a PyTorch user writes it: torch.save of a dict (Debian's python3-torch), four
// classes of [2, 3, 3] samples around separated centres.
void WriteBlobsTensorFile(const std::string& path) {
  auto py = testing::RunCommand(
      {"/usr/bin/python3", "-c",
       "import sys, torch\n"
       "g = torch.Generator().manual_seed(0)\n"
       "centers = torch.randn(4, 2, 3, 3, generator=g) * 3\n"
       "def split(n):\n"
       "    y = torch.arange(4).repeat(n)\n"
       "    return centers[y] + torch.randn(4 * n, 2, 3, 3, generator=g), y.to(torch.int32)\n"
       "tx, ty = split(300); vx, vy = split(50)\n"
       "torch.save({'train_x': tx, 'train_y': ty, 'test_x': vx, 'test_y': vy}, sys.argv[1])\n",
       path});
  ASSERT_EQ(py.exit_code, 0) << "python3-torch (scripts/install-deps.sh installs it): "
                             << py.output;
}

TEST_F(TenancyTest, CsvAndTensorDataSetsTrainTheMlp) {
  const std::string csv = dir_ + "/blobs-csv", pt = dir_ + "/blobs-pt";
  std::filesystem::create_directories(csv);
  std::filesystem::create_directories(pt);
  std::ofstream(csv + "/train.csv") << BlobsCsv(400, 1);
  std::ofstream(csv + "/test.csv") << BlobsCsv(100, 2);
  WriteBlobsTensorFile(pt + "/data.pt");
  for (const auto& [name, dir, format] :
       {std::tuple<std::string, std::string, std::string>{"blobs-csv", csv, "csv"},
        {"blobs-pt", pt, "tensors"}}) {
    auto add = weftd_->CliAs(
        admin_, {"dataset", "add", name, "--path", dir, "--format", format, "--tenants", "all"});
    ASSERT_EQ(add.exit_code, 0) << add.output;
  }
  const std::string team = NewTenant("tabular");
  auto job = [&](const std::string& name, const std::string& model, const std::string& set) {
    return SubmitAs(team, Manifest(name, "model: " + model + "\ndata: {dataset: " + set +
                                             "}\ntraining: {epochs: 4, batch_size: 32, threads: "
                                             "1}\nresources: {cpus: 1, memory_mb: 512}\n"));
  };
  const std::string from_csv =
      job("from-csv", "{architecture: mlp, hidden_units: [32]}", "blobs-csv");
  const std::string from_pt = job("from-pt", "{architecture: mlp, hidden_units: [32]}", "blobs-pt");
  for (const auto& [id, seen] :
       {std::pair<std::string, std::string>{from_csv, "of shape [8], 3 classes (csv)"},
        {from_pt, "of shape [2, 3, 3], 4 classes (tensors)"}}) {
    json done = WaitFor(id, {"COMPLETED"}, 180, team);
    EXPECT_GE(done["models"]["final"]["test_accuracy"].get<double>(), 0.9) << done.dump(2);
    // The learner read the samples' shape and the number of classes from the data.
    auto log = weftd_->CliAs(team, {"logs", id});
    EXPECT_THAT(log.output, HasSubstr(seen)) << log.output;
  }
  // The CNN takes only 28×28 images: the job fails at once, saying why.
  const std::string cnn = job("cnn-on-csv", "{architecture: cnn}", "blobs-csv");
  json failed = WaitFor(cnn, {"FAILED"}, 60, team);
  EXPECT_THAT(failed.value("reason", ""),
              HasSubstr("model.architecture: cnn takes 28×28 grey images [N, 1, 28, 28]; this "
                        "data set's samples are [N, 8]"));
  EXPECT_EQ(failed.value("attempt", -1), 1) << "a user error is not retried";
}

TEST_F(TenancyTest, ATenantsOwnDataSetIsAnUploadedTensorFileNoOtherTenantCanName) {
  const std::string pt = dir_ + "/blobs.pt";
  WriteBlobsTensorFile(pt);
  const std::string team = NewTenant("own-data"), other = NewTenant("other");
  const std::string manifest =
      Manifest("own-data",
               "model: {architecture: mlp, hidden_units: [32]}\n"
               "data: {artifact: blobs}\ntraining: {epochs: 4, batch_size: 32, "
               "threads: 1}\nresources: {cpus: 1, memory_mb: 512}\n");
  auto submitted = weftd_->CliAs(team, {"submit", manifest, "--upload", "blobs=" + pt});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  std::smatch m;
  const std::string out = submitted.output;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("job (job-[0-9a-z]+-[0-9a-z]+) submitted")));
  const std::string id = m[1].str();
  // Replacing the artifact afterwards does not change the submitted job's data.
  std::ofstream(dir_ + "/garbage.pt") << "not a tensor file";
  auto replaced =
      weftd_->CliAs(team, {"artifact", "upload", dir_ + "/garbage.pt", "--name", "blobs"});
  ASSERT_EQ(replaced.exit_code, 0) << replaced.output;
  json done = WaitFor(id, {"COMPLETED"}, 180, team);
  EXPECT_GE(done["models"]["final"]["test_accuracy"].get<double>(), 0.9) << done.dump(2);
  auto log = weftd_->CliAs(team, {"logs", id});
  EXPECT_THAT(log.output, HasSubstr("of shape [2, 3, 3], 4 classes (tensors)")) << log.output;

  // Another tenant naming it is refused at submission, the field named.
  auto refused = weftd_->CliAs(other, {"submit", manifest});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.output, HasSubstr("data.artifact: no artifact 'blobs'")) << refused.output;
}

// Each layer's kernel choice in learner 0's log of job `id` (read as `token`): 't' where the
// learner timed it, 'c' where it took a cached choice, layer after layer.
std::string KernelChoices(const testing::WeftdProcess& weftd, const std::string& token,
                          const std::string& id) {
  const testing::CommandResult r = weftd.CliAs(token, {"logs", id, "--rank", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::string choices;
  const std::regex line(R"(kernel of \w+ \[[0-9, ]+\] -> \d+: \w+(, cached)?)");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), line), end; it != end; ++it) {
    choices += (*it)[1].matched ? 'c' : 't';
  }
  return choices;
}

TEST_F(TenancyTest, AJobTakesTheKernelChoicesItsTenantsEarlierJobsTimedAndNoOtherTenants) {
  const std::string b = NewTenant("team-b");
  const std::string first = Submit("first", kQuick);
  WaitFor(first, {"COMPLETED"}, 120);
  EXPECT_EQ(KernelChoices(*weftd_, weftd_->token(), first), "tt") << "fc1 and fc2, timed";
  // Another tenant's job of the same model and batch times its own.
  const std::string theirs = SubmitAs(b, Manifest("theirs", kQuick));
  WaitFor(theirs, {"COMPLETED"}, 120, b);
  EXPECT_EQ(KernelChoices(*weftd_, b, theirs), "tt");
  // The tenant's next job takes what its first one timed.
  const std::string second = Submit("second", kQuick);
  WaitFor(second, {"COMPLETED"}, 120);
  EXPECT_EQ(KernelChoices(*weftd_, weftd_->token(), second), "cc");
  // Once the tenant is deleted, a tenant made with its name starts afresh.
  ASSERT_EQ(weftd_->CliAs(b, {"delete", theirs}).exit_code, 0);
  ASSERT_EQ(weftd_->CliAs(admin_, {"tenant", "delete", "team-b"}).exit_code, 0);
  const std::string data = dir_ + "/data";
  EXPECT_FALSE(std::filesystem::exists(data + "/tenants/team-b"));
  // Even from the files a weftd that crashed in the middle of the deletion would leave: choices
  // that fit its job, and an upload.
  std::filesystem::create_directories(data + "/tenants/team-b");
  std::filesystem::copy_file(data + "/tenants/default/kernels.tsv",
                             data + "/tenants/team-b/kernels.tsv");
  std::filesystem::create_directories(data + "/artifacts/team-b");
  std::ofstream(data + "/artifacts/team-b/left-behind") << "an earlier tenant's upload";
  const std::string again = NewTenant("team-b");
  EXPECT_FALSE(std::filesystem::exists(data + "/artifacts/team-b/left-behind"));
  const std::string anew = SubmitAs(again, Manifest("anew", kQuick));
  WaitFor(anew, {"COMPLETED"}, 120, again);
  EXPECT_EQ(KernelChoices(*weftd_, again, anew), "tt");
}

TEST_F(TenancyTest, TheAdminTokenRotates) {
  const std::string tenant = NewTenant("team-a");
  auto r = weftd_->CliAs(admin_, {"token", "rotate-admin"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("weft_[0-9a-f]{64}"))) << r.output;
  const std::string fresh = m[0].str();
  EXPECT_NE(fresh, admin_);
  EXPECT_EQ(weftd_->admin_token(), fresh) << "admin.token holds the new token";
  int status = 0;
  json j = Get("/v1/tenants", admin_, &status);
  EXPECT_EQ(status, 401);
  EXPECT_THAT(j["error"].value("message", ""), HasSubstr("revoked"));
  Get("/v1/tenants", fresh, &status);
  EXPECT_EQ(status, 200);
  Get("/v1/jobs", tenant, &status);
  EXPECT_EQ(status, 200) << "tenant tokens are untouched";
  // Only the admin may rotate.
  auto denied = weftd_->CliAs(tenant, {"token", "rotate-admin"});
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_THAT(denied.output, HasSubstr("needs the admin token"));
}

}  // namespace
}  // namespace weft
