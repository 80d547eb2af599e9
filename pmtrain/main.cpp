// pmtrain: the reward-model trainer's command line.
//   pmtrain [train] CONFIG.yaml [--set key=value ...]   train (srun -n 8 pmtrain configs/qwen3_4b_bs128.yaml)
//   pmtrain eval CONFIG.yaml [--set key=value ...]      evaluate on the test split
//   pmtrain plan CONFIG.yaml [--world N] [--set ...]    memory plan per rank, no training
//   pmtrain export RUN_DIR [--step N] --to OUT_DIR [--dtype bf16|fp32]   an HF model directory
//   pmtrain score --model DIR --data FILE [--out FILE]   chosen/rejected rewards per pair (JSONL)
//   pmtrain tokenize --tokenizer PATH                    {"text"} lines on stdin -> {"ids"} lines
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "comm/bootstrap.h"
#include "core/check.h"
#include "data/tokenize_tool.h"
#include "pmtrain/commands.h"
#include "pmtrain/export_command.h"

using namespace zero;
using namespace zero::pmtrain;

namespace {
void usage() {
  fprintf(stderr,
          "usage:\n"
          "  pmtrain [train] CONFIG.yaml [--set key=value ...]\n"
          "  pmtrain eval CONFIG.yaml [--set key=value ...]\n"
          "  pmtrain plan CONFIG.yaml [--world N] [--set key=value ...]\n"
          "  pmtrain export RUN_DIR [--step N] --to OUT_DIR [--dtype bf16|fp32]\n"
          "  pmtrain score --model DIR --data FILE [--out FILE] [--tokenizer PATH] [--max-len N] [--format raw|chat]\n"
          "  pmtrain tokenize --tokenizer PATH\n");
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    usage();
    return args.empty() ? 2 : 0;
  }
  std::string cmd = args[0];
  if (ends_with(cmd, ".yaml") || ends_with(cmd, ".yml")) {
    cmd = "train";  // `pmtrain CONFIG.yaml` means train
  } else {
    args.erase(args.begin());
  }
  // Commands that need no MPI.
  try {
    if (cmd == "tokenize") {
      std::string tok;
      for (size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == "--tokenizer") tok = args[i + 1];
      if (tok.empty()) { usage(); return 2; }
      return data::run_tokenize(tok, std::cin, std::cout);
    }
    if (cmd == "plan") return run_plan(args);
    if (cmd == "score") return run_score(args);
    if (cmd == "export") return run_export(args);
  } catch (const Error& e) {
    fprintf(stderr, "pmtrain %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
  if (cmd != "train" && cmd != "eval") {
    fprintf(stderr, "pmtrain: unknown command '%s'\n", cmd.c_str());
    usage();
    return 2;
  }
  MpiRuntime mpi(&argc, &argv);
  try {
    return cmd == "train" ? run_train(args, mpi) : run_eval(args, mpi);
  } catch (const ConfigError& e) {
    // Configuration errors are the same on every rank: say it once (rank 0), and give rank 0 time to
    // say it before another rank's abort takes the job down.
    if (mpi.info().rank == 0) {
      fprintf(stderr, "pmtrain: error: %s\n", e.what());
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
  } catch (const Error& e) {
    fprintf(stderr, "pmtrain: rank %d: error: %s\n", mpi.info().rank, e.what());
  } catch (const std::exception& e) {
    fprintf(stderr, "pmtrain: rank %d: unexpected error: %s\n", mpi.info().rank, e.what());
  }
  fflush(stderr);
  // Never leave other ranks blocked in a collective.
  if (mpi.info().world > 1) MpiRuntime::abort_all(1);
  return 1;
}
