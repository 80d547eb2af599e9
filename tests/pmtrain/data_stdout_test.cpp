// pmtrain/paths.h data_stdout(): after it, what anything else prints to stdout (as NCCL prints its version and
// NCCL_DEBUG lines) lands in stderr, and stdout holds only the document written to data_stdout().
// Each case runs in a child process whose stdout and stderr are files, read back by the parent.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "pmtrain/paths.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Captured {
  std::string out, err;
};

// Runs body in a child with stdout and stderr redirected to files; returns what each received.
template <class Body>
Captured in_child(Body body) {
  const std::string dir = testing::TempDir();
  const std::string out = dir + "/data_stdout_out.txt", err = dir + "/data_stdout_err.txt";
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || dup2(o, STDOUT_FILENO) < 0 || dup2(e, STDERR_FILENO) < 0) _exit(2);
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  return {read_file(out), read_file(err)};
}

TEST(DataStdout, OtherWritesToStdoutGoToStderr) {
  const Captured c = in_child([] {
    printf("before\n");  // printed before the call: still stdout's
    FILE* data = zero::pmtrain::data_stdout();
    printf("NCCL version 2.28.9+cuda13.0\n");  // a library's line, C stdio
    fflush(stdout);
    std::cout << "a C++ stream line" << std::endl;
    (void)!write(STDOUT_FILENO, "raw fd 1\n", 9);  // straight to the descriptor
    fprintf(data, "{\"tokens_per_s\": 1}\n");
    fflush(data);
    fprintf(stderr, "an error line\n");
    EXPECT_EQ(zero::pmtrain::data_stdout(), data);  // one stream, however often asked
  });
  EXPECT_EQ(c.out, "before\n{\"tokens_per_s\": 1}\n");
  EXPECT_EQ(c.err, "NCCL version 2.28.9+cuda13.0\na C++ stream line\nraw fd 1\nan error line\n");
}

}  // namespace
