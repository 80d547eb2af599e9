// Learning-rate schedules over optimizer steps: constant, linear decay, cosine; each with linear
// warmup and a floor of min_lr_ratio * peak. A skipped (non-finite) step does not advance them.
#pragma once
#include <cstdint>
#include <string>

namespace zero::optim {

enum class ScheduleKind : uint8_t { Constant, Linear, Cosine };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Constant;
  float peak_lr = 1e-5f;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  float min_lr_ratio = 0.0f;

  // lr for the 1-based optimizer step t.
  float lr_at(int64_t t) const;
};

ScheduleKind parse_schedule_kind(const std::string& s);  // "constant" | "linear" | "cosine"

}  // namespace zero::optim
