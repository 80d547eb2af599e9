#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace zero::optim {

const std::vector<std::pair<std::string, ScheduleKind>>& schedule_names() {
  static const std::vector<std::pair<std::string, ScheduleKind>> names{
      {"constant", ScheduleKind::Constant}, {"linear", ScheduleKind::Linear}, {"cosine", ScheduleKind::Cosine}};
  return names;
}

float LrSchedule::lr_at(int64_t t) const {
  if (warmup_steps > 0 && t <= warmup_steps) return peak_lr * float(t) / float(warmup_steps);
  const float floor = peak_lr * min_lr_ratio;
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress = std::clamp(double(t - warmup_steps) / double(decay_steps), 0.0, 1.0);
  switch (kind) {
    case ScheduleKind::Constant: return peak_lr;
    case ScheduleKind::Linear: return floor + (peak_lr - floor) * float(1.0 - progress);
    case ScheduleKind::Cosine: return floor + (peak_lr - floor) * float(0.5 * (1.0 + std::cos(M_PI * progress)));
  }
  return peak_lr;
}

}  // namespace zero::optim
