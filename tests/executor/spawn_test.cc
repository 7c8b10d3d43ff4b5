// Spawn: a learner starts with every signal at its default disposition and none blocked, though
// its caller (weftd) ignores SIGPIPE and blocks others: what /proc/PID/status says of the child.
#include "executor/spawn.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace weft {
namespace {

std::string StatusField(const std::string& status, const std::string& field) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  }
  return "";
}

TEST(SpawnTest, TheChildIgnoresAndBlocksNoSignalItsCallerDid) {
  char dir[] = "/tmp/weft-spawn-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/status";
  struct sigaction ign {
  }, old_pipe{}, old_usr1{};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGPIPE, &ign, &old_pipe), 0);
  ASSERT_EQ(sigaction(SIGUSR1, &ign, &old_usr1), 0);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);

  SpawnRequest req;
  req.argv = {"/bin/cat", "/proc/self/status"};
  req.log_path = log;
  SpawnResult r = Spawn(req);
  sigaction(SIGPIPE, &old_pipe, nullptr);
  sigaction(SIGUSR1, &old_usr1, nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_EQ(r.failed_step, SpawnResult::kNone) << SpawnResult::StepName(r.failed_step);
  int wstatus = 0;
  ASSERT_EQ(waitpid(r.pid, &wstatus, 0), r.pid);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);

  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  const std::string ignored = StatusField(text.str(), "SigIgn");
  const std::string blocked = StatusField(text.str(), "SigBlk");
  ASSERT_FALSE(ignored.empty()) << text.str();
  EXPECT_EQ(std::stoull(ignored, nullptr, 16), 0u) << "SigIgn:" << ignored;
  EXPECT_EQ(std::stoull(blocked, nullptr, 16), 0u) << "SigBlk:" << blocked;
  unlink(log.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace weft
