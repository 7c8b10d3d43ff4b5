// weft artifact: a tenant's uploaded files (a TorchScript model, a code archive, a small data set)
// that its manifests name; and the uploads `weft submit --upload` makes first.
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "common/files.h"

namespace weft::cli {

int UploadArtifact(const Client& api, const std::string& name, const std::string& path) {
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) {
    std::cerr << "error: cannot read " << path << ": " << ec.message() << "\n";
    return 2;
  }
  // weftd refuses a file over its limit before reading it, and closes the connection; say so
  // here, before sending it.
  Reply limits = api.Call("GET", "/v1/artifacts");
  if (limits.status != 200) return Fail(limits);
  const int64_t max_bytes = limits.Json().value("max_artifact_bytes", int64_t{0});
  if (max_bytes > 0 && bytes > max_bytes) {
    std::cerr << absl::StrFormat(
        "error: %s is %.1f MiB, over the %.1f MiB weftd accepts per artifact (weftd "
        "--max-artifact-mb)\n",
        path, static_cast<double>(bytes) / (1 << 20), static_cast<double>(max_bytes) / (1 << 20));
    return 1;
  }
  Reply r = api.Upload("/v1/artifacts?name=" + name, path);
  if (r.status != 200 && r.status != 201) return Fail(r);
  json j = r.Json();
  std::cout << absl::StrFormat("%s artifact %s from %s (%d bytes, sha256 %s)\n",
                               r.status == 201 ? "uploaded" : "replaced", j.value("name", ""), path,
                               j.value("bytes", int64_t{0}), j.value("sha256", "").substr(0, 12));
  return 0;
}

namespace {

int List(const Client& api) {
  Reply r = api.Call("GET", "/v1/artifacts");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  std::cout << absl::StrFormat("%-32s %12s  %-14s %s\n", "NAME", "BYTES", "SHA256", "CREATED");
  for (const auto& a : j["artifacts"]) {
    std::cout << absl::StrFormat("%-32s %12d  %-14s %s\n", a.value("name", ""),
                                 a.value("bytes", int64_t{0}), a.value("sha256", "").substr(0, 12),
                                 a.value("created", ""));
  }
  std::cout << absl::StrFormat("%.1f of %.1f MiB used\n", j.value("bytes_used", 0.0) / (1 << 20),
                               j.value("bytes_quota", 0.0) / (1 << 20));
  return 0;
}

int Download(const Client& api, const std::string& name, std::string out) {
  Reply r = api.Call("GET", "/v1/artifacts/" + name + "/content");
  if (r.status != 200) return Fail(r);
  if (out.empty()) out = name;
  if (absl::Status s = WriteFileAtomic(out, r.body); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  std::cout << "artifact " << name << " written to " << out << " (" << r.body.size() << " bytes)\n";
  return 0;
}

struct Args {
  std::string name, path, out;
};

}  // namespace

void AddArtifactCommands(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<Args>();
  auto run = [&ctx, a](CLI::App* cmd, auto fn) {
    cmd->callback([&ctx, a, fn] { ctx.exit_code = fn(ctx.client(), *a); });
  };
  auto* artifact = app.add_subcommand(
      "artifact", "your uploaded files: TorchScript models, code archives, small data sets");
  artifact->require_subcommand(1);
  auto* upload = artifact->add_subcommand("upload", "upload a file (replaces a same-named one)");
  upload->add_option("FILE", a->path, "the file")->required()->check(CLI::ExistingFile);
  upload->add_option("--name", a->name, "its name (default: the file's name)");
  run(upload, [](const Client& c, const Args& x) {
    return UploadArtifact(
        c, x.name.empty() ? std::filesystem::path(x.path).filename().string() : x.name, x.path);
  });
  run(artifact->add_subcommand("list", "list your artifacts and the room they take"),
      [](const Client& c, const Args&) { return List(c); });
  auto* download = artifact->add_subcommand("download", "download an artifact");
  download->add_option("NAME", a->name, "artifact name")->required();
  download->add_option("-o,--output", a->out, "output path (default: NAME)");
  run(download, [](const Client& c, const Args& x) { return Download(c, x.name, x.out); });
  auto* remove = artifact->add_subcommand("delete", "delete an artifact");
  remove->add_option("NAME", a->name, "artifact name")->required();
  run(remove, [](const Client& c, const Args& x) {
    return Act(c, "DELETE", "/v1/artifacts/" + x.name, "artifact " + x.name + " deleted");
  });
}

}  // namespace weft::cli
