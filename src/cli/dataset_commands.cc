// weft dataset: the data sets manifests name (data.dataset). The admin registers and removes them;
// a tenant lists those it may use.
#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"

namespace weft::cli {
namespace {

struct Args {
  std::string name, path, format = "idx", tenants;
};

int Add(const Client& api, const Args& a) {
  json body = {{"name", a.name}, {"path", a.path}, {"format", a.format}};
  if (a.tenants == "all") {
    body["tenants"] = "all";
  } else {
    std::vector<std::string> names = absl::StrSplit(a.tenants, ',', absl::SkipWhitespace());
    body["tenants"] = names;
  }
  Reply r = api.Call("POST", "/v1/datasets", body.dump());
  if (r.status != 201) return Fail(r);
  json j = r.Json();
  std::cout << absl::StrFormat(
      "data set %s registered: %s (%s), for %s\n", j.value("name", ""), j.value("path", ""),
      j.value("format", ""),
      j["tenants"].is_string()
          ? std::string("every tenant")
          : "tenants " + absl::StrJoin(j["tenants"].get<std::vector<std::string>>(), ", "));
  return 0;
}

int List(const Client& api) {
  Reply r = api.Call("GET", "/v1/datasets");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  const bool admin = !j["datasets"].empty() && j["datasets"][0].contains("path");
  std::cout << absl::StrFormat("%-24s %-8s %s\n", "NAME", "FORMAT", admin ? "PATH  TENANTS" : "");
  for (const auto& d : j["datasets"]) {
    std::string where;
    if (d.contains("path")) {
      where = d.value("path", "") + "  " +
              (d["tenants"].is_string()
                   ? std::string("all")
                   : absl::StrJoin(d["tenants"].get<std::vector<std::string>>(), ","));
    }
    std::cout << absl::StrFormat("%-24s %-8s %s\n", d.value("name", ""), d.value("format", ""),
                                 where);
  }
  return 0;
}

}  // namespace

void AddDatasetCommands(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<Args>();
  auto run = [&ctx, a](CLI::App* cmd, auto fn) {
    cmd->callback([&ctx, a, fn] { ctx.exit_code = fn(ctx.client(), *a); });
  };
  auto* dataset =
      app.add_subcommand("dataset", "data sets manifests name (data.dataset); the admin's to add");
  dataset->require_subcommand(1);
  auto* add = dataset->add_subcommand("add", "register a directory as a data set (admin)");
  add->add_option("NAME", a->name, "its name, as manifests give it")->required();
  add->add_option("--path", a->path, "absolute directory on every node")->required();
  add->add_option("--format", a->format,
                  "idx (MNIST's four IDX files), csv (train.csv, test.csv) or tensors (data.pt)")
      ->capture_default_str();
  add->add_option("--tenants", a->tenants, "tenants who may use it: a,b or all")->required();
  run(add, [](const Client& c, const Args& x) { return Add(c, x); });
  run(dataset->add_subcommand("list", "the data sets you may use (the admin: all, with paths)"),
      [](const Client& c, const Args&) { return List(c); });
  auto* remove = dataset->add_subcommand(
      "delete", "unregister a data set (admin); its files stay, queued jobs naming it fail");
  remove->add_option("NAME", a->name, "data set name")->required();
  run(remove, [](const Client& c, const Args& x) {
    return Act(c, "DELETE", "/v1/datasets/" + x.name, "data set " + x.name + " removed");
  });
}

}  // namespace weft::cli
