// A throwaway PostgreSQL cluster for tests: initdb and pg_ctl on a temporary directory, reached
// only through a unix socket in that directory (no TCP port is opened, so clusters of
// concurrent tests never collide). initdb refuses to run as root, so as root the cluster runs
// as the `postgres` user (the postgresql package creates it), else as the caller. For speed
// the server runs with fsync off: a test cluster's durability is not under test.
#pragma once

#include <memory>
#include <string>

namespace weft::testing {

class PgCluster {
 public:
  // Starts a cluster, or returns nullptr with the reason in *why (PostgreSQL's binaries absent,
  // no unprivileged user to run them as, initdb or the server failing — its log is named).
  static std::unique_ptr<PgCluster> Start(std::string* why);
  // The cluster of this test process, started on first use and stopped at exit; nullptr with
  // *why when it cannot start.
  static PgCluster* Shared(std::string* why);
  ~PgCluster();  // stops the server (immediate shutdown) and removes the directory
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  // Creates database `name` ([A-Za-z0-9_], at most 63 bytes) if it does not exist and returns
  // its connection URI (postgresql://weft@/NAME?host=SOCKET_DIR&port=PORT); "" on failure.
  std::string Database(const std::string& name);
  // Runs `sql` in database `name` with psql; true if it succeeds.
  bool Sql(const std::string& name, const std::string& sql) const;
  // Stops the server (fast shutdown) / starts it again on the same data; false on failure.
  bool StopServer();
  bool StartServer();

 private:
  PgCluster(std::string bin, std::string dir, std::string user)
      : bin_(std::move(bin)), dir_(std::move(dir)), user_(std::move(user)) {}
  // Runs `command` (a shell command line) as the cluster's user; true if it exits 0.
  bool RunAsUser(const std::string& command) const;

  std::string bin_;                   // PostgreSQL's bin directory
  std::string dir_;                   // data in dir_/data, the socket in dir_, logs in dir_/*.log
  std::string user_;                  // who the server runs as ("" = this process's user)
  static constexpr int kPort = 5432;  // names the socket file only
};

}  // namespace weft::testing
