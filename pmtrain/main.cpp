// pmtrain: the reward-model trainer's command line (cli.h lists the commands and options; `pmtrain
// --help`, `pmtrain COMMAND --help`). train, eval and bench run under MPI; the other commands, help, --version,
// usage errors and train --dry-run need none, and under a launcher only rank 0 does them.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "comm/bootstrap.h"
#include "comm/launch_env.h"
#include "core/check.h"
#include "data/tokenize_tool.h"
#include "pmtrain/bench_command.h"
#include "pmtrain/cli.h"
#include "pmtrain/commands.h"
#include "pmtrain/config.h"
#include "pmtrain/export_command.h"
#include "pmtrain/paths.h"
#include "pmtrain/plan_command.h"
#include "pmtrain/plot_command.h"
#include "pmtrain/render_command.h"
#include "pmtrain/score_command.h"
#include "pmtrain/stop_signals.h"
#include "pmtrain/sweep_command.h"

using namespace zero;
using namespace zero::pmtrain;

namespace {
// Commands without MPI: one process does them (the others of a launched job have nothing to add).
int run_local(const CommandLine& cl) {
  if (cl.command == "plan") return run_plan(cl.plan);
  if (cl.command == "export") return run_export(cl.export_request);
  if (cl.command == "score") return run_score(cl.score);
  if (cl.command == "render") return run_render(cl.render);
  if (cl.command == "sweep") return run_sweep(cl.sweep);
  if (cl.command == "plot") return run_plot(cl.plot);
  if (cl.command == "config-doc") return fputs(config_reference_markdown().c_str(), stdout) < 0;
  if (cl.command == "tokenize") return data::run_tokenize(existing_path(cl.tokenizer, "--tokenizer"), std::cin, std::cout);
  return run_dry_run(cl.train);
}

// A command's output that did not reach its standard output (a full disk, a closed pipe) fails the command:
// rc 0 over rows or reports that never landed would be a silent loss.
int with_stdout_checked(const CommandLine& cl, int rc) {
  const std::optional<std::string> failed = flush_standard_output();
  if (!failed) return rc;
  fprintf(stderr, "pmtrain %s: error: writing the standard output failed%s\n", cl.command.c_str(), failed->c_str());
  return rc ? rc : 1;
}
}  // namespace

int main(int argc, char** argv) {
  const bool rank0 = launcher_rank().value_or(0) == 0;
  CommandLine cl;
  if (const auto code = parse_command_line(argc, argv, rank0, cl)) return *code;
  // Under mpirun, srun or a batch script stdout is a pipe or a file, so the C library buffers it in 4 KiB blocks:
  // a line would reach the job's log only when a block fills or a step line flushes it, and a job killed in
  // the meantime (a dead rank's abort, a time limit, an OOM kill) would lose the last lines said before it,
  // the ones its log needs most. So each line goes out whole as it is printed, as on a terminal. Not for the
  // commands whose stdout is data (rows, ids, a document): those stay block-buffered.
  if (!is_data_output_command(cl)) setvbuf(stdout, nullptr, _IOLBF, 0);

  // calibrate too: it measures the collectives between the ranks it was started with (one: the 1-rank copies).
  const bool under_mpi = cl.command == "train" || cl.command == "eval" || cl.command == "bench" ||
                         cl.command == "calibrate";
  if (!under_mpi || cl.train.dry_run) {
    if (!rank0) return 0;
    try {
      return with_stdout_checked(cl, run_local(cl));
    } catch (const std::exception& e) {  // zero::Error, and anything a library throws: one line, never a crash
      fprintf(stderr, "pmtrain %s: error: %s\n", cl.command.c_str(), e.what());
      return 1;
    }
  }

  // train takes SIGTERM/SIGINT as "stop at the next step boundary and save" from the start: a signal during
  // MPI start-up or data loading would otherwise kill the rank with no word (Slurm may send it at any time).
  if (cl.command == "train") install_stop_signals();
  MpiRuntime mpi(&argc, &argv);
  const int rank = mpi.info().rank;
  // "rank N: " only where there are several ranks to tell apart.
  const std::string who = mpi.info().world > 1 ? fmt::format("rank {}: ", rank) : "";
  MpiRuntime::Failure failure;
  const std::string head = fmt::format("pmtrain {}: ", cl.command);
  try {
    require_launched_world(mpi.info());  // srun without PMI: N worlds of 1, refused before anything runs
    if (cl.command == "bench") return with_stdout_checked(cl, run_bench(cl.bench, mpi));
    if (cl.command == "calibrate") return with_stdout_checked(cl, run_calibrate(cl.calibrate, mpi));
    return with_stdout_checked(cl, cl.command == "train" ? run_train(cl.train, mpi) : run_eval(cl.eval, mpi));
  } catch (const PeerFailure&) {
    // Another rank failed and says why.
  } catch (const ConfigError& e) {
    failure.shared = head + "error: " + e.what();  // the same on every rank: said once
  } catch (const Error& e) {  // one agreed on (a checkpoint's) names its rank already and is said once
    (e.on_every_rank ? failure.shared : failure.local) = head + (e.on_every_rank ? "" : who) + "error: " + e.what();
  } catch (const std::exception& e) {
    failure.local = head + who + "unexpected error: " + e.what();
  }
  // Prints before anything can abort the job; returns (to MPI_Finalize) when every rank failed alike, else
  // aborts so no rank is left blocked in a collective.
  return mpi.finish_failed(failure);
}
