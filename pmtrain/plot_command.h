// `pmtrain plot RUN_DIR [RUN_DIR ...] [--out DIR]`: PNG curves against the step from each run's
// metrics.jsonl, the runs overlaid (one line each, named by its directory): loss, accuracy, reward
// margin (train, and eval where the run has eval records), grad norm, learning rate and tokens/s.
// No MPI; gnuplot draws (pmtrain/gnuplot.h).
#pragma once
#include <string>
#include <vector>

namespace zero::pmtrain {

struct PlotArgs {
  std::vector<std::string> run_dirs;
  std::string out = "plots";
};

int run_plot(const PlotArgs& a);

}  // namespace zero::pmtrain
