// `pmtrain sweep CONFIG --ranks 1,2,4 --stages 0,1,2,3 [--micro 1,2 | --micro-tokens 1024,2048] [--steps N]
//  [--out DIR] [--set k=v]`:
// trains every cell of the grid as its own job (`mpirun -np R pmtrain train CONFIG ...`, or `srun -n R`
// inside a Slurm allocation) in DIR/r<R>_s<S>[_m<M> | _t<T>], reads each run's metrics.jsonl, and writes
// DIR/sweep.csv, DIR/sweep.md (a markdown table) and, through gnuplot, DIR/tokens_per_s.png and
// DIR/peak_memory.png (x = ranks, one line per stage (and micro); on GPUs the device memory, else the host's). A cell that fails is a row marked
// failed with its reason, and the sweep goes on. The jobs inherit the environment (source
// launch/mpi_env.sh first where ranks outnumber cores or run as root).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::pmtrain {

struct SweepArgs {
  std::string config;
  std::vector<std::string> overrides;  // --set, passed to every cell before the sweep's own
  std::vector<int> ranks{1, 2, 4};
  std::vector<int> stages{0, 1, 2, 3};
  std::vector<int> micro;              // empty: the config's batch.micro
  std::vector<int> micro_tokens;       // batch.micro_tokens values instead of micro (token-budget micro-batches)
  int64_t steps = 0;                   // 0: the config's run.steps / epochs
  std::string out = "runs/sweep";
  std::string launcher;                // mpirun | srun; "" = srun inside a Slurm allocation, else mpirun
  std::string mpirun = "mpirun";       // the mpirun executable
  double cell_timeout_s = 0;           // 0 = no limit
};

int run_sweep(const SweepArgs& a);

}  // namespace zero::pmtrain
