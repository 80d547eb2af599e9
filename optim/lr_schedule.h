// Learning-rate schedules over optimizer steps: constant, linear decay, cosine; each with linear
// warmup and a floor of min_lr_ratio * peak. A skipped (non-finite) step does not advance them.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zero::optim {

enum class ScheduleKind : uint8_t { Constant, Linear, Cosine };
// Each kind's spelling (pmtrain's optim.schedule, the PyTorch binding's schedule=): the one table.
const std::vector<std::pair<std::string, ScheduleKind>>& schedule_names();

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Constant;
  float peak_lr = 1e-5f;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  float min_lr_ratio = 0.0f;

  // lr for the 1-based optimizer step t: warmup reaches the peak on step warmup_steps and decay the floor on
  // step total_steps. (transformers' get_*_schedule_with_warmup give step t their value at t - 1: a first
  // step at lr 0, the floor never reached; ours is that curve one step earlier.)
  float lr_at(int64_t t) const;
};

}  // namespace zero::optim
