#include "pmtrain/progress.h"

#include "pmtrain/metrics.h"

namespace zero::pmtrain {

Progress::Progress(double every_s) : every_s_(every_s), next_(every_s) {}

bool Progress::due() {
  if (every_s_ <= 0) return false;
  const double t = elapsed_s();
  if (t < next_) return false;
  next_ = t + every_s_;
  return true;
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::eta(double fraction_done) const {
  if (!(fraction_done > 0)) return "unknown";
  return format_duration(elapsed_s() * (1.0 - fraction_done) / fraction_done);
}

}  // namespace zero::pmtrain
