// The pmtrain subcommands behind main(), each on its parsed options (cli.h); each returns an exit code
// and throws zero::Error for main to print.
#pragma once
#include "comm/bootstrap.h"
#include "pmtrain/cli.h"
#include "pmtrain/config.h"

namespace zero::pmtrain {

// CONFIG (an absolute path tried, see paths.h) with --set overrides, every path in it made absolute.
Config load_resolved_config(const ConfigArgs& a);

int run_train(const TrainArgs& a, MpiRuntime& mpi);
// train --dry-run: the resolved config and the memory plan; no MPI.
int run_dry_run(const TrainArgs& a);
int run_eval(const EvalArgs& a, MpiRuntime& mpi);

}  // namespace zero::pmtrain
