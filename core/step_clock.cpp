#include "core/step_clock.h"

#include "core/check.h"

namespace zero {

const char* time_category_name(TimeCategory c) {
  static const char* names[] = {"gemm", "attention", "elementwise", "grad_buckets", "optimizer", "comm"};
  static_assert(sizeof(names) / sizeof(names[0]) == kTimeCategories);
  return names[static_cast<size_t>(c)];
}

double StepTimes::total() const {
  double s = 0;
  for (double v : seconds) s += v;
  return s;
}

namespace {
// The entry of `name` in ops (appended when new): a step names some 30 ops, so a scan is enough.
OpTime& op_entry(std::vector<OpTime>& ops, const char* name, TimeCategory c) {
  for (OpTime& o : ops)
    if (o.name == name) return o;
  return ops.emplace_back(OpTime{name, c, 0, 0, {}});
}
}  // namespace

StepTimes& StepTimes::operator+=(const StepTimes& o) {
  for (size_t i = 0; i < kTimeCategories; ++i)
    seconds[i] += o.seconds[i], calls[i] += o.calls[i], host_seconds[i] += o.host_seconds[i];
  device_timed = device_timed || o.device_timed;
  for (const OpTime& op : o.ops) {
    OpTime& mine = op_entry(ops, op.name, op.category);
    mine.seconds += op.seconds, mine.calls += op.calls, mine.host_seconds += op.host_seconds;
    mine.launches += op.launches;
    mine.work.bytes += op.work.bytes, mine.work.flops += op.work.flops;
  }
  return *this;
}

void StepClock::mark() {
  const size_t i = owner_.size();
  record(i);
  const auto now = std::chrono::steady_clock::now();
  const uint64_t launches = launches_now();
  if (i < host_t_.size()) {
    host_t_[i] = now;
    launch_t_[i] = launches;
  } else {
    host_t_.push_back(now);
    launch_t_.push_back(launches);
  }
  owner_.push_back(open_.empty() ? int8_t(-1) : int8_t(open_.back()));
  owner_op_.push_back(open_ops_.empty() ? nullptr : open_ops_.back());
}

void StepClock::enter(TimeCategory c, const char* op, OpWork work) {
  ZERO_CHECK(c < TimeCategory::Count, "StepClock::enter: category {} out of range", int(c));
  open_.push_back(c);
  open_ops_.push_back(op);
  calls_[static_cast<size_t>(c)] += 1;
  if (op) {
    OpTime& o = op_entry(op_calls_, op, c);
    o.calls += 1;
    o.work.bytes += work.bytes, o.work.flops += work.flops;
  }
  mark();
}

void StepClock::leave() {
  ZERO_CHECK(!open_.empty(), "StepClock::leave without enter");
  open_.pop_back();
  open_ops_.pop_back();
  mark();
}

StepTimes StepClock::take() {
  ZERO_CHECK(open_.empty(), "StepClock::take inside a scope ({} open)", open_.size());
  StepTimes t;
  t.calls = calls_;
  t.ops = op_calls_;
  t.device_timed = device_timed_;
  if (owner_.size() > 1) {
    gaps_.assign(owner_.size() - 1, 0.0);
    resolve(gaps_);
    for (size_t i = 0; i < gaps_.size(); ++i) {
      const double host = std::chrono::duration<double>(host_t_[i + 1] - host_t_[i]).count();
      if (owner_[i] >= 0) t.seconds[size_t(owner_[i])] += gaps_[i], t.host_seconds[size_t(owner_[i])] += host;
      if (owner_op_[i]) {
        OpTime& op = op_entry(t.ops, owner_op_[i], TimeCategory::Count);  // entered: there
        op.seconds += gaps_[i], op.host_seconds += host, op.launches += launch_t_[i + 1] - launch_t_[i];
      }
    }
  }
  discard();
  return t;
}

void StepClock::discard() {
  ZERO_CHECK(open_.empty(), "StepClock::discard inside a scope ({} open)", open_.size());
  owner_.clear();  // keeps its capacity: a steady state of steps allocates nothing
  owner_op_.clear();
  calls_ = {};
  op_calls_.clear();
}

void HostStepClock::resolve(std::span<double> gaps) {
  const auto t = host_times();
  for (size_t i = 0; i < gaps.size(); ++i) gaps[i] = std::chrono::duration<double>(t[i + 1] - t[i]).count();
}

}  // namespace zero
