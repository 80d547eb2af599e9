#include "pmtrain/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/check.h"

extern char** environ;

namespace zero::pmtrain {

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& output_path, double timeout_s) {
  ZERO_REQUIRE(!argv.empty(), InputError, "run_process: no program given");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);  // never waits on a terminal
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ZERO_REQUIRE(rc == 0, InputError, "cannot run '{}': {}", argv[0], std::strerror(rc));

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  ProcessResult result;
  bool termed = false;
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, timeout_s > 0 ? WNOHANG : 0);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) throw InputError(fmt::format("waiting for '{}': {}", argv[0], std::strerror(errno)));
    if (timeout_s <= 0) continue;
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (!termed && waited > timeout_s) {
      kill(pid, SIGTERM);  // mpirun passes it on to the ranks, which stop after their step
      termed = result.timed_out = true;
    } else if (termed && waited > timeout_s + 10) {
      kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string telling_line(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string line, last, match;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    last = line;
    if (line.find(needle) != std::string::npos) match = line;
  }
  return match.empty() ? last : match;
}

}  // namespace zero::pmtrain
