#include "pmtrain/stop_signals.h"

#include <csignal>
#include <cstring>

#include <unistd.h>

namespace zero::pmtrain {
namespace {

volatile std::sig_atomic_t g_signal = 0;

void write_err(const char* s) { (void)!write(STDERR_FILENO, s, std::strlen(s)); }

// Async-signal-safe: a flag, write(2) and _exit(2) only.
void on_signal(int sig) {
  if (g_signal != 0) {
    write_err("pmtrain: second signal: exiting now without a checkpoint\n");
    _exit(128 + sig);
  }
  g_signal = sig;
  write_err(sig == SIGTERM ? "pmtrain: SIGTERM: stopping at the next step boundary to save a checkpoint "
                             "(send it again to exit at once)\n"
                           : "pmtrain: SIGINT: stopping at the next step boundary to save a checkpoint "
                             "(press Ctrl-C again to exit at once)\n");
}

}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a signal during a blocking call (file I/O, MPI progress) must not fail it
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool stop_requested() { return g_signal != 0; }
const char* stop_signal_name() { return g_signal == SIGINT ? "SIGINT" : "SIGTERM"; }

}  // namespace zero::pmtrain
