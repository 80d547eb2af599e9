// pmtrain: the reward-model trainer's command line (cli.h lists the commands and options; `pmtrain
// --help`, `pmtrain COMMAND --help`). train and eval run under MPI; the other commands, help, --version,
// usage errors and train --dry-run need none, and under a launcher only rank 0 does them.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "comm/bootstrap.h"
#include "comm/launch_env.h"
#include "core/check.h"
#include "data/tokenize_tool.h"
#include "pmtrain/cli.h"
#include "pmtrain/commands.h"
#include "pmtrain/export_command.h"
#include "pmtrain/paths.h"
#include "pmtrain/plan_command.h"
#include "pmtrain/score_command.h"

using namespace zero;
using namespace zero::pmtrain;

namespace {
// Commands without MPI: one process does them (the others of a launched job have nothing to add).
int run_local(const CommandLine& cl) {
  if (cl.command == "plan") return run_plan(cl.plan);
  if (cl.command == "calibrate") return run_calibrate(cl.calibrate);
  if (cl.command == "export") return run_export(cl.export_request);
  if (cl.command == "score") return run_score(cl.score);
  if (cl.command == "tokenize") return data::run_tokenize(existing_path(cl.tokenizer, "--tokenizer"), std::cin, std::cout);
  return run_dry_run(cl.train);
}
}  // namespace

int main(int argc, char** argv) {
  const bool rank0 = launcher_rank().value_or(0) == 0;
  CommandLine cl;
  if (const auto code = parse_command_line(argc, argv, rank0, cl)) return *code;

  if ((cl.command != "train" && cl.command != "eval") || cl.train.dry_run) {
    if (!rank0) return 0;
    try {
      return run_local(cl);
    } catch (const std::exception& e) {  // zero::Error, and anything a library throws: one line, never a crash
      fprintf(stderr, "pmtrain %s: error: %s\n", cl.command.c_str(), e.what());
      return 1;
    }
  }

  MpiRuntime mpi(&argc, &argv);
  const int rank = mpi.info().rank;
  // "rank N: " only where there are several ranks to tell apart.
  const std::string who = mpi.info().world > 1 ? fmt::format("rank {}: ", rank) : "";
  try {
    return cl.command == "train" ? run_train(cl.train, mpi) : run_eval(cl.eval, mpi);
  } catch (const ConfigError& e) {
    // Configuration errors are the same on every rank: say it once (rank 0), and give rank 0 time to
    // say it before another rank's abort takes the job down.
    if (rank == 0) {
      fprintf(stderr, "pmtrain %s: error: %s\n", cl.command.c_str(), e.what());
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
  } catch (const Error& e) {
    fprintf(stderr, "pmtrain %s: %serror: %s\n", cl.command.c_str(), who.c_str(), e.what());
  } catch (const std::exception& e) {
    fprintf(stderr, "pmtrain %s: %sunexpected error: %s\n", cl.command.c_str(), who.c_str(), e.what());
  }
  fflush(stderr);
  // Never leave other ranks blocked in a collective.
  if (mpi.info().world > 1) MpiRuntime::abort_all(1);
  return 1;
}
