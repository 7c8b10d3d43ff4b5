// weft tenant, token, queue and nodes: the admin's commands for tenants and their tokens, and
// everyone's view of the queue and the nodes.
#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"

namespace weft::cli {
namespace {

// "512", "512MiB" or "8GiB" (MiB unless suffixed MiB/M/MB or GiB/G/GB) -> MiB; false if not.
bool ParseMib(const std::string& text, int64_t* mib) {
  int64_t mult = 1;
  std::string num = text;
  for (auto [suffix, m] : std::vector<std::pair<std::string, int64_t>>{
           {"GiB", 1024}, {"G", 1024}, {"GB", 1024}, {"MiB", 1}, {"M", 1}, {"MB", 1}}) {
    if (absl::EndsWith(num, suffix)) {
      num.resize(num.size() - suffix.size());
      mult = m;
      break;
    }
  }
  double v;
  if (!absl::SimpleAtod(num, &v) || v < 0 || v * mult > 1e15) return false;
  *mib = static_cast<int64_t>(v * mult);
  return true;
}

// "cpus=4,memory=8GiB,gpus=0" (memory as ParseMib) -> quota JSON;
// "none" -> null. Empty string and false on a bad spec, with `error` set.
bool ParseQuota(const std::string& text, json* out, std::string* error) {
  if (text == "none") {
    *out = nullptr;
    return true;
  }
  json q = json::object();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    std::string key = kv.first, val = kv.second;
    if (key == "cpus") {
      double v;
      if (!absl::SimpleAtod(val, &v) || v < 0)
        return *error = "cpus must be a non-negative number", false;
      q["cpus"] = v;
    } else if (key == "memory" || key == "memory_mb") {
      int64_t mib = 0;
      if (!ParseMib(val, &mib)) return *error = "memory must be like 512MiB or 8GiB", false;
      q["memory_mb"] = mib;
    } else if (key == "gpus") {
      int v;
      if (!absl::SimpleAtoi(val, &v) || v < 0)
        return *error = "gpus must be a non-negative integer", false;
      q["gpus"] = v;
    } else {
      *error = absl::StrCat("unknown quota resource '", key, "'; use cpus=, memory=, gpus=");
      return false;
    }
  }
  *out = q;
  return true;
}

// The tenant's disk as "used/quota MiB" (the quota "-" when there is none), or "-" when weftd
// enforces no disk quotas.
std::string DiskText(const json& t) {
  if (!t.contains("disk") || !t["disk"].is_object()) return "-";
  const json& d = t["disk"];
  auto mib = [](const json& v) {
    return v.is_number() ? absl::StrFormat("%.0f", v.get<double>() / (1 << 20)) : "-";
  };
  return absl::StrCat(mib(d.value("used_bytes", json())), "/", mib(d.value("quota_bytes", json())),
                      " MiB");
}

std::string QuotaText(const json& t) {
  if (!t.contains("quota") || t["quota"].is_null()) return "none";
  const json& q = t["quota"];
  return absl::StrFormat("cpus=%g,memory=%dMiB,gpus=%d", q.value("cpus", 0.0),
                         q.value("memory_mb", int64_t{0}), q.value("gpus", 0));
}

int Tenants(const Client& api, bool usage) {
  Reply r = api.Call("GET", "/v1/tenants");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  if (usage) {
    std::cout << absl::StrFormat("%-16s %6s %8s %8s %10s %10s %10s  %s\n", "TENANT", "WEIGHT",
                                 "RUNNING", "QUEUED", "USED CPUS", "SHARE", "FAIR SHARE", "DISK");
  } else {
    std::cout << absl::StrFormat("%-16s %6s %-36s %s\n", "TENANT", "WEIGHT", "QUOTA", "CREATED");
  }
  for (const auto& t : j["tenants"]) {
    if (usage) {
      const json& u = t["usage"];
      std::cout << absl::StrFormat(
          "%-16s %6g %8d %8d %10g %9.1f%% %9.1f%%  %s\n", t.value("name", ""),
          t.value("weight", 1.0), u.value("running_jobs", 0), u.value("queued_jobs", 0),
          u["used"].value("cpus", 0.0), 100 * u.value("dominant_share", 0.0),
          100 * u.value("fair_share", 0.0), DiskText(t));
    } else {
      std::cout << absl::StrFormat("%-16s %6g %-36s %s\n", t.value("name", ""),
                                   t.value("weight", 1.0), QuotaText(t), t.value("created", ""));
    }
  }
  return 0;
}

// "deliver ~42 s" / "complete: unknown yet" / "deliver: beyond epochs" / "-" (no target left):
// a queue entry's next_target, in seconds of training once it runs.
std::string NextTargetText(const json& next) {
  if (!next.is_object()) return "-";
  const std::string target = next.value("target", "");
  if (next.value("beyond_budget", false)) return target + ": beyond epochs";
  const json& eta = next["eta_s"];
  if (!eta.is_number()) return target + ": unknown yet";
  return absl::StrCat(target, " ~", Duration(eta.get<double>()));
}

int Queue(const Client& api) {
  Reply r = api.Call("GET", "/v1/queue");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  if (j["queue"].empty()) {
    std::cout << "the queue is empty\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-4s %-22s %-12s %-10s %8s  %-18s %s\n", "#", "JOB", "TENANT",
                               "STATE", "PRIORITY", "NEXT TARGET IN", "REASON");
  for (const auto& e : j["queue"]) {
    std::cout << absl::StrFormat(
        "%-4d %-22s %-12s %-10s %8d  %-18s %s\n", e.value("position", 0), e.value("id", ""),
        e.value("tenant", ""), e.value("state", ""), e.value("priority", 0),
        NextTargetText(e.value("next_target", json())), e.value("reason", ""));
  }
  return 0;
}

int Nodes(const Client& api) {
  Reply r = api.Call("GET", "/v1/nodes");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  std::cout << absl::StrFormat("%-12s %13s %17s %9s  %s\n", "NODE", "CPUS", "MEMORY MiB", "GPUS",
                               "JOBS");
  for (const auto& n : j["nodes"]) {
    const json &cap = n["capacity"], &al = n["allocated"];
    std::vector<std::string> jobs;
    for (const auto& job : n["jobs"]) jobs.push_back(job.value("id", ""));
    if (n.value("other_tenants_jobs", 0) > 0) {
      jobs.push_back(absl::StrCat("+", n.value("other_tenants_jobs", 0), " of other tenants"));
    }
    std::cout << absl::StrFormat("%-12s %6g/%-6g %8d/%-8d %4d/%-4d  %s\n", n.value("name", ""),
                                 al.value("cpus", 0.0), cap.value("cpus", 0.0),
                                 al.value("memory_mb", int64_t{0}),
                                 cap.value("memory_mb", int64_t{0}), al.value("gpus", 0),
                                 cap.value("gpus", 0), absl::StrJoin(jobs, ", "));
    // Each GPU and who holds it.
    for (const auto& g : n.contains("gpus") && n["gpus"].is_array() ? n["gpus"] : json::array()) {
      std::string holder = "free";
      if (g["job"].is_string()) {
        holder = absl::StrCat(g["job"].get<std::string>(), " (learner ",
                              g["learner"].is_number() ? g["learner"].dump() : "?", ")");
      } else if (g.value("held", false)) {
        holder = "held (another tenant's job, or a learner leaving)";
      }
      std::cout << absl::StrFormat("  gpu %-4d %-28s %-20s %s\n", g.value("index", 0),
                                   g.value("cdi", "").empty() ? "-" : g.value("cdi", ""),
                                   g.value("model", ""), holder);
    }
  }
  if (j.contains("runtime")) {
    const json& rt = j["runtime"];
    std::cout << "learners run in: " << rt.value("description", rt.value("name", "")) << "\n";
  }
  return 0;
}

// The values the tenant and token subcommands parse into.
struct Args {
  std::string name, quota, disk_quota, token_id;
  double weight = 0;
};

// weft tenant create / update: POST or PATCH a tenant body.
int PutTenant(const Client& api, const Args& a, bool creating) {
  json body = json::object();
  if (creating) body["name"] = a.name;
  if (!a.quota.empty()) {
    std::string error;
    json q;
    if (!ParseQuota(a.quota, &q, &error)) {
      std::cerr << "error: --quota: " << error << "\n";
      return 2;
    }
    body["quota"] = q;
  }
  if (a.weight != 0) body["weight"] = a.weight;
  if (!a.disk_quota.empty()) {
    int64_t mib = 0;
    if (a.disk_quota == "default") {
      body["disk_quota_mb"] = nullptr;
    } else if (ParseMib(a.disk_quota, &mib) && mib >= 1) {
      body["disk_quota_mb"] = mib;
    } else {
      std::cerr << "error: --disk-quota must be like 512MiB or 50GiB, or 'default'\n";
      return 2;
    }
  }
  Reply r = creating ? api.Call("POST", "/v1/tenants", body.dump(), "application/json")
                     : api.Call("PATCH", "/v1/tenants/" + a.name, body.dump(), "application/json");
  if (r.status != 200 && r.status != 201) return Fail(r);
  json t = r.Json();
  const json disk = t.value("disk_quota_mb", json());
  std::cout << (creating ? "created" : "updated") << " tenant " << t.value("name", "") << " (quota "
            << QuotaText(t) << ", weight " << t.value("weight", 1.0) << ", disk quota "
            << (disk.is_number() ? absl::StrCat(disk.get<int64_t>(), " MiB") : "weftd's default")
            << ")\n";
  return 0;
}

int CreateToken(const Client& api, const std::string& tenant) {
  Reply r = api.Call("POST", "/v1/tenants/" + tenant + "/tokens", "", "application/json");
  if (r.status != 201) return Fail(r);
  json t = r.Json();
  std::cerr << "token " << t.value("id", "") << " for tenant " << tenant
            << " (shown only now; weft keeps only its SHA-256):\n";
  std::cout << t.value("token", "") << "\n";
  return 0;
}

int RotateAdminToken(const Client& api) {
  Reply r = api.Call("POST", "/v1/admin/token/rotate", "", "application/json");
  if (r.status != 201) return Fail(r);
  json t = r.Json();
  std::cerr << "admin token " << t.value("id", "") << ": " << t.value("note", "") << "\n";
  std::cout << t.value("token", "") << "\n";
  return 0;
}

int ListTokens(const Client& api, const std::string& tenant) {
  Reply r = api.Call("GET", "/v1/tenants/" + tenant + "/tokens");
  if (r.status != 200) return Fail(r);
  const json j = r.Json();
  for (const auto& t : j["tokens"]) {
    std::cout << absl::StrFormat(
        "%-16s created %s%s\n", t.value("id", ""), t.value("created", ""),
        t["revoked"].is_null() ? "" : "  REVOKED " + t["revoked"].get<std::string>());
  }
  return 0;
}

void AddTenantCommands(CLI::App& app, Context& ctx, std::shared_ptr<Args> a) {
  auto run = [&ctx, a](CLI::App* cmd, auto fn) {
    cmd->callback([&ctx, a, fn] { ctx.exit_code = fn(ctx.client(), *a); });
  };
  auto* tenant = app.add_subcommand("tenant", "manage tenants (admin token)");
  tenant->require_subcommand(1);
  auto* create = tenant->add_subcommand("create", "create a tenant");
  create->add_option("NAME", a->name, "tenant name")->required();
  create->add_option("--quota", a->quota, "e.g. cpus=4,memory=8GiB,gpus=0 (default: no quota)");
  create->add_option("--weight", a->weight, "fair-share weight (default 1)");
  create->add_option("--disk-quota", a->disk_quota,
                     "disk its jobs' files and artifacts may take, e.g. 50GiB (default: weftd's "
                     "--tenant-disk-quota-mb)");
  run(create, [](const Client& c, const Args& x) { return PutTenant(c, x, true); });
  run(tenant->add_subcommand("list", "list tenants with their quota and weight"),
      [](const Client& c, const Args&) { return Tenants(c, false); });
  run(tenant->add_subcommand("usage",
                             "each tenant's share of the cluster vs its fair share, and its disk"),
      [](const Client& c, const Args&) { return Tenants(c, true); });
  auto* update = tenant->add_subcommand("update", "change a tenant's quotas or weight");
  update->add_option("NAME", a->name, "tenant name")->required();
  update->add_option("--quota", a->quota, "e.g. cpus=8,memory=16GiB,gpus=0, or none");
  update->add_option("--weight", a->weight, "fair-share weight");
  update->add_option("--disk-quota", a->disk_quota, "e.g. 50GiB, or default (weftd's)");
  run(update, [](const Client& c, const Args& x) { return PutTenant(c, x, false); });
  auto* remove = tenant->add_subcommand("delete", "delete a tenant (refused while it owns jobs)");
  remove->add_option("NAME", a->name, "tenant name")->required();
  run(remove, [](const Client& c, const Args& x) {
    return Act(c, "DELETE", "/v1/tenants/" + x.name, "deleted tenant " + x.name);
  });
}

void AddTokenCommands(CLI::App& app, Context& ctx, std::shared_ptr<Args> a) {
  auto run = [&ctx, a](CLI::App* cmd, auto fn) {
    cmd->callback([&ctx, a, fn] { ctx.exit_code = fn(ctx.client(), *a); });
  };
  auto* tok = app.add_subcommand("token", "manage a tenant's bearer tokens (admin token)");
  tok->require_subcommand(1);
  auto* create = tok->add_subcommand("create", "create a token for a tenant (shown once)");
  create->add_option("TENANT", a->name, "tenant name")->required();
  run(create, [](const Client& c, const Args& x) { return CreateToken(c, x.name); });
  auto* list = tok->add_subcommand("list", "list a tenant's token ids");
  list->add_option("TENANT", a->name, "tenant name")->required();
  run(list, [](const Client& c, const Args& x) { return ListTokens(c, x.name); });
  auto* revoke = tok->add_subcommand("revoke", "revoke a token");
  revoke->add_option("TENANT", a->name, "tenant name")->required();
  revoke->add_option("ID", a->token_id, "token id (tok-...)")->required();
  run(revoke, [](const Client& c, const Args& x) {
    return Act(c, "DELETE", "/v1/tenants/" + x.name + "/tokens/" + x.token_id,
               "revoked " + x.token_id);
  });
  run(tok->add_subcommand("rotate-admin",
                          "replace the admin token: prints the new one, rewrites "
                          "<data-dir>/admin.token and revokes every other admin token"),
      [](const Client& c, const Args&) { return RotateAdminToken(c); });
}

}  // namespace

void AddClusterCommands(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<Args>();
  AddTenantCommands(app, ctx, a);
  AddTokenCommands(app, ctx, a);
  app.add_subcommand("queue", "the queue in order, with why each job waits")->callback([&ctx] {
    ctx.exit_code = Queue(ctx.client());
  });
  app.add_subcommand("nodes", "each node's capacity, allocation and jobs")->callback([&ctx] {
    ctx.exit_code = Nodes(ctx.client());
  });
}

}  // namespace weft::cli
