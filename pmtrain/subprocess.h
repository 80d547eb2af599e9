// Runs another program and waits for it: its argv as given (no shell, so paths and values need no
// quoting), its stdout and stderr into one file, an optional time limit. Used by `pmtrain sweep` (one
// `mpirun ... pmtrain train` per cell) and by the gnuplot renderer.
#pragma once
#include <string>
#include <vector>

namespace zero::pmtrain {

struct ProcessResult {
  int exit_code = 0;       // the program's exit status; 128 + N when signal N ended it
  bool timed_out = false;  // the time limit passed: it was sent SIGTERM (SIGKILL 10 s later)
};

// argv[0] is looked up in PATH. Throws InputError naming the program when it cannot be started (not
// installed, not executable); timeout_s <= 0 waits without a limit.
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& output_path, double timeout_s = 0);

// The last line of `path` that contains `needle` (e.g. "error"), else its last non-empty line; "" when
// the file is empty or missing. For saying why a child failed in one line.
std::string telling_line(const std::string& path, const std::string& needle);

}  // namespace zero::pmtrain
