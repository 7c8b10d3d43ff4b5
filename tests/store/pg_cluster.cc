#include "store/pg_cluster.h"

#include <glob.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace weft::testing {
namespace {

// The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/N/bin), or "".
std::string FindBinDir() {
  glob_t g{};
  std::vector<std::string> found;
  if (glob("/usr/lib/postgresql/*/bin/initdb", 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) found.push_back(g.gl_pathv[i]);
  }
  globfree(&g);
  if (found.empty()) return "";
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return std::atoi(a.c_str() + 20) < std::atoi(b.c_str() + 20);  // after /usr/lib/postgresql/
  });
  return std::filesystem::path(found.back()).parent_path().string();
}

}  // namespace

std::unique_ptr<PgCluster> PgCluster::Start(std::string* why) {
  const std::string bin = FindBinDir();
  if (bin.empty()) {
    *why =
        "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); "
        "scripts/install-deps.sh installs it";
    return nullptr;
  }
  std::string user;
  if (geteuid() == 0) {
    struct passwd* pw = getpwnam("postgres");
    if (pw == nullptr) {
      *why = "running as root and there is no `postgres` user to run initdb as";
      return nullptr;
    }
    user = "postgres";
  }
  char tmpl[] = "/tmp/weft-pg-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *why = "cannot create a temporary directory";
    return nullptr;
  }
  std::unique_ptr<PgCluster> c(new PgCluster(bin, tmpl, user));
  if (!user.empty()) {
    struct passwd* pw = getpwnam(user.c_str());
    if (chown(c->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      *why = "cannot give the temporary directory to " + user;
      return nullptr;
    }
  }
  if (!c->RunAsUser(bin + "/initdb -D " + c->dir_ + "/data -U weft -A trust -E UTF8 " +
                    "--locale=C --no-sync > " + c->dir_ + "/initdb.log 2>&1")) {
    *why = "initdb failed; see " + c->dir_ + "/initdb.log";
    c->dir_.clear();  // keep the log
    return nullptr;
  }
  {
    std::ofstream conf(c->dir_ + "/data/postgresql.conf", std::ios::app);
    conf << "listen_addresses = ''\nunix_socket_directories = '" << c->dir_ << "'\nport = " << kPort
         << "\nfsync = off\nfull_page_writes = off\nmax_connections = 50\n";
  }
  if (!c->StartServer()) {
    *why = "the PostgreSQL server did not start; see " + c->dir_ + "/server.log";
    return nullptr;
  }
  return c;
}

PgCluster* PgCluster::Shared(std::string* why) {
  static std::string error;
  static PgCluster* cluster = [] {
    PgCluster* c = Start(&error).release();
    if (c != nullptr) std::atexit([] { delete Shared(nullptr); });
    return c;
  }();
  if (cluster == nullptr && why != nullptr) *why = error;
  return cluster;
}

PgCluster::~PgCluster() {
  if (dir_.empty()) return;
  RunAsUser(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate -w stop >> " + dir_ +
            "/server.log 2>&1");
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool PgCluster::RunAsUser(const std::string& command) const {
  const std::string line =
      user_.empty() ? command : "runuser -u " + user_ + " -- sh -c '" + command + "'";
  return std::system(line.c_str()) == 0;
}

bool PgCluster::StartServer() {
  return RunAsUser(bin_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/server.log -w -t 60 start" +
                   " > /dev/null 2>&1");
}

bool PgCluster::StopServer() {
  return RunAsUser(bin_ + "/pg_ctl -D " + dir_ + "/data -m fast -w stop > /dev/null 2>&1");
}

bool PgCluster::Sql(const std::string& name, const std::string& sql) const {
  const std::string path = dir_ + "/query.sql";
  std::ofstream(path) << sql << "\n";
  const std::string line = bin_ + "/psql -h " + dir_ + " -p " + std::to_string(kPort) +
                           " -U weft -d " + name + " -q -v ON_ERROR_STOP=1 -f " + path +
                           " > /dev/null 2>&1";
  return std::system(line.c_str()) == 0;
}

std::string PgCluster::Database(const std::string& name) {
  if (name.empty() || name.size() > 63 || !std::all_of(name.begin(), name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
      })) {
    return "";
  }
  const std::string uri =
      "postgresql://weft@/" + name + "?host=" + dir_ + "&port=" + std::to_string(kPort);
  // createdb fails when it exists; then connecting tells.
  const std::string base = bin_ + "/createdb -h " + dir_ + " -p " + std::to_string(kPort) +
                           " -U weft " + name + " > /dev/null 2>&1";
  if (std::system(base.c_str()) != 0) {
    if (!Sql(name, "SELECT 1")) return "";
  }
  return uri;
}

}  // namespace weft::testing
