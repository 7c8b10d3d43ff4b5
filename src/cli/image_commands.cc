// weft image: the container images command jobs run on (a manifest's `image`). A tenant adds its
// own from an archive it uploads (podman save --format oci-archive, docker save, or a root file
// system tarball); the admin adds images from files on weftd's host for the tenants it names.
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"

namespace weft::cli {
namespace {

struct Args {
  std::string name, from, artifact, path, tenants;
};

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

void Print(const json& j) {
  std::cout << absl::StrFormat("image %s (%s, %s, sha256 %s)", j.value("name", ""),
                               j.value("format", ""), Mib(j.value("bytes", int64_t{0})),
                               j.value("digest", "").substr(0, 12));
  if (j.contains("tenants")) {
    std::cout << ", for "
              << (j["tenants"].is_string()
                      ? std::string("every tenant")
                      : "tenants " +
                            absl::StrJoin(j["tenants"].get<std::vector<std::string>>(), ", "));
  }
  std::cout << "\n";
}

int Add(const Client& api, const Args& a) {
  json body = {{"name", a.name}};
  std::string uploaded;
  if (!a.path.empty()) {  // the admin's, from weftd's host
    body["path"] = std::filesystem::absolute(a.path).string();
    if (a.tenants == "all") {
      body["tenants"] = "all";
    } else {
      std::vector<std::string> names = absl::StrSplit(a.tenants, ',', absl::SkipWhitespace());
      body["tenants"] = names;
    }
  } else {
    // A tenant's: the archive goes up as an artifact first, then becomes the image.
    std::string artifact = a.artifact;
    if (!a.from.empty()) {
      artifact = "image-" + a.name;
      if (int rc = UploadArtifact(api, artifact, a.from); rc != 0) return rc;
      uploaded = artifact;
    }
    body["artifact"] = artifact;
  }
  std::cout << "importing image " << a.name << " (may take a minute for a large one)\n";
  Reply r = api.Call("POST", "/v1/images", body.dump());
  if (!uploaded.empty()) {
    // The image holds it now (and counts against the quota): the upload itself goes.
    Reply gone = api.Call("DELETE", "/v1/artifacts/" + uploaded);
    if (gone.status != 200) std::cerr << "note: artifact " << uploaded << " was kept\n";
  }
  if (r.status != 201) return Fail(r);
  std::cout << "added ";
  Print(r.Json());
  return 0;
}

int List(const Client& api) {
  Reply r = api.Call("GET", "/v1/images");
  if (r.status != 200) return Fail(r);
  std::cout << absl::StrFormat("%-24s %-7s %-15s %10s  %s\n", "NAME", "OWNER", "FORMAT", "SIZE",
                               "SHA256");
  const json j = r.Json();  // (a member of a temporary would dangle in the loop)
  for (const auto& i : j["images"]) {
    std::cout << absl::StrFormat("%-24s %-7s %-15s %10s  %s\n", i.value("name", ""),
                                 i.value("owner", ""), i.value("format", ""),
                                 Mib(i.value("bytes", int64_t{0})),
                                 i.value("digest", "").substr(0, 12));
  }
  return 0;
}

int Show(const Client& api, const Args& a) {
  Reply r = api.Call("GET", "/v1/images/" + a.name);
  if (r.status != 200) return Fail(r);
  Print(r.Json());
  return 0;
}

}  // namespace

void AddImageCommands(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<Args>();
  auto run = [&ctx, a](CLI::App* cmd, auto fn) {
    cmd->callback([&ctx, a, fn] { ctx.exit_code = fn(ctx.client(), *a); });
  };
  auto* image = app.add_subcommand(
      "image", "container images command jobs run on (a manifest's image: NAME)");
  image->require_subcommand(1);
  auto* add = image->add_subcommand(
      "add",
      "add an image: yours from an archive (--from or --artifact), or, as the admin, one "
      "from a file on weftd's host for the tenants you name (--path, --tenants)");
  add->add_option("NAME", a->name, "its name, as manifests give it")->required();
  auto* from = add->add_option("--from", a->from,
                               "an OCI archive (podman save --format oci-archive), a Docker "
                               "archive or a root file system tarball, uploaded first")
                   ->check(CLI::ExistingFile);
  auto* artifact = add->add_option("--artifact", a->artifact, "an archive you uploaded already");
  auto* path = add->add_option("--path", a->path, "the admin's: the archive on weftd's host");
  add->add_option("--tenants", a->tenants, "the admin's: tenants who may use it, a,b or all")
      ->needs(path);
  from->excludes(artifact)->excludes(path);
  artifact->excludes(path);
  add->callback([&ctx, a] {
    if (a->from.empty() && a->artifact.empty() && a->path.empty()) {
      std::cerr << "error: give --from FILE (or --artifact NAME), or as the admin --path FILE\n";
      ctx.exit_code = 2;
      return;
    }
    if (!a->path.empty() && a->tenants.empty()) {
      std::cerr << "error: --path needs --tenants (a,b or all)\n";
      ctx.exit_code = 2;
      return;
    }
    ctx.exit_code = Add(ctx.client(), *a);
  });
  run(image->add_subcommand("list", "the images you may use (yours, and the admin's for you)"),
      [](const Client& c, const Args&) { return List(c); });
  auto* show = image->add_subcommand("show", "one image");
  show->add_option("NAME", a->name, "image name")->required();
  run(show, [](const Client& c, const Args& x) { return Show(c, x); });
  auto* remove = image->add_subcommand(
      "delete",
      "remove one of your images (the admin: one of the admin's); queued jobs naming "
      "it fail when they would start");
  remove->add_option("NAME", a->name, "image name")->required();
  run(remove, [](const Client& c, const Args& x) {
    return Act(c, "DELETE", "/v1/images/" + x.name, "image " + x.name + " removed");
  });
}

}  // namespace weft::cli
