// The pmtrain subcommands behind main(): each parses its own arguments and returns an exit code.
#pragma once
#include <string>
#include <vector>

#include "comm/bootstrap.h"

namespace zero::pmtrain {

int run_train(const std::vector<std::string>& args, MpiRuntime& mpi);
int run_eval(const std::vector<std::string>& args, MpiRuntime& mpi);
int run_plan(const std::vector<std::string>& args);
int run_score(const std::vector<std::string>& args);

}  // namespace zero::pmtrain
