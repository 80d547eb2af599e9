// Preemption as Slurm does it: SIGTERM to every task (scancel, the time limit, `#SBATCH --signal`), then
// SIGKILL after KillWait; SIGINT is Ctrl-C under mpirun. The first signal only records the request: the
// ranks agree on it at the next step boundary (the vote rides in the step's metrics all-reduce, no extra
// collective), save a checkpoint and exit with kExitStopped. A second signal exits at once.
#pragma once

namespace zero::pmtrain {

// The exit code of a run stopped by a signal after saving (EX_TEMPFAIL: "try again later"; a Slurm
// script can requeue on it).
constexpr int kExitStopped = 75;

void install_stop_signals();
bool stop_requested();       // a first SIGTERM/SIGINT arrived on this rank
const char* stop_signal_name();

}  // namespace zero::pmtrain
