// What the fuzz targets of weftd's request handling run against: a real SQLite store on a
// temporary directory (on /dev/shm when there is one, so fsync costs nothing), the controller
// with the FIFO policy and an executor that starts no process, a learner key, the admin token,
// two tenants with a token each, and a job of tenant `acme` whose learner has been launched
// (attempt 1, STARTING). Built once per fuzzing process; requests change it as they would a
// real weftd's.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "common/fake_executor.h"
#include "control/artifacts.h"
#include "control/controller.h"
#include "control/tenancy.h"
#include "scheduler/policies.h"
#include "store/sqlite_store.h"

namespace weft::fuzz {

struct World {
  std::string dir;
  std::unique_ptr<SqliteStore> store;
  FakeExecutor executor;
  std::unique_ptr<scheduler::Policy> policy;
  std::unique_ptr<Controller> controller;
  std::unique_ptr<Artifacts> artifacts;
  std::string admin_token, acme_token, globex_token;
  std::string job_id, job_credential;

  static World& Get() {
    static World* world = new World();  // never destroyed: libFuzzer exits from anywhere
    return *world;
  }

 private:
  World() {
    std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/weft-fuzz-XXXXXX";
    dir = mkdtemp(tmpl.data());
    store = std::move(*SqliteStore::Open(dir + "/weft.db"));
    policy = std::move(*scheduler::MakePolicy("fifo"));
    ControllerOptions o;
    o.data_dir = dir;
    o.nodes = {scheduler::Node{"local", {4, 8192, 0}, {}, {}, {}}};
    o.coordinator_address = "127.0.0.1:9";
    o.learner_key = std::string(32, 'k');
    controller = std::make_unique<Controller>(*store, executor, *policy, SystemClock::Get(), o);
    // Small limits, so fuzzed uploads reach them.
    artifacts = std::make_unique<Artifacts>(*store, Env::Default(), dir, SystemClock::Get(),
                                            ArtifactLimits{4 << 10, 16 << 10});
    const TimeMs now = SystemClock::Get().NowMs();
    admin_token = *EnsureAdminToken(*store, dir, now).value();
    for (const char* name : {"acme", "globex"}) {
      TenantRecord tenant;
      tenant.name = name;
      tenant.created_ms = now;
      store->CreateTenant(tenant).IgnoreError();
    }
    acme_token = Tenancy(*store, SystemClock::Get()).IssueToken("acme")->second;
    globex_token = Tenancy(*store, SystemClock::Get()).IssueToken("globex")->second;
    store->PutDataset({"fashion-mnist", dir + "/fashion-mnist", "idx", true, {}, now})
        .IgnoreError();
    std::vector<FieldError> errors;
    job_id = controller
                 ->Submit("name: seed\nmodel: {architecture: mlp}\ntraining: {epochs: 1}\n", "acme",
                          &errors)
                 ->id;
    controller->Tick();  // launches its learner: STARTING, attempt 1
    job_credential = controller->credentials().For(job_id, /*attempt=*/1);
    std::atexit([] { std::filesystem::remove_all(Get().dir); });
  }
};

}  // namespace weft::fuzz
