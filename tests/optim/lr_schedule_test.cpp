// Every schedule kind at literal values worked out by hand (never by calling schedule code), so a
// schedule that loses its warmup, its floor or the shape of its decay fails here.
//
// The shared case: peak 2, warmup 4 steps, 12 steps in all, min_lr_ratio 0.25 (floor 0.5). Steps are
// 1-based: warmup reaches the peak at t = 4 (lr = 2 t / 4); decay then runs over the 8 steps after it,
// progress p = (t - 4) / 8, to the floor at t = 12, and stays there past the end.
//   linear: 0.5 + 1.5 (1 - p)        cosine: 0.5 + 1.5 * 0.5 (1 + cos(pi p))
#include <gtest/gtest.h>

#include "optim/lr_schedule.h"

namespace zero::optim {
namespace {

constexpr double kTol = 1e-6;  // float arithmetic against 9-digit literals

LrSchedule shared_case(ScheduleKind kind) { return {kind, 2.0f, 4, 12, 0.25f}; }

void expect_warmup(const LrSchedule& s) {
  EXPECT_NEAR(s.lr_at(1), 0.5, kTol);
  EXPECT_NEAR(s.lr_at(2), 1.0, kTol);
  EXPECT_NEAR(s.lr_at(3), 1.5, kTol);
  EXPECT_NEAR(s.lr_at(4), 2.0, kTol);
}

TEST(LrSchedule, ConstantWarmsUpThenHoldsThePeakIgnoringTheFloor) {
  const LrSchedule s = shared_case(ScheduleKind::Constant);
  expect_warmup(s);
  for (int64_t t : {5, 8, 12, 20}) EXPECT_NEAR(s.lr_at(t), 2.0, kTol) << "t " << t;
}

TEST(LrSchedule, LinearWarmsUpThenFallsInEqualStepsToTheFloor) {
  const LrSchedule s = shared_case(ScheduleKind::Linear);
  expect_warmup(s);
  EXPECT_NEAR(s.lr_at(5), 1.8125, kTol);   // p = 1/8: 0.5 + 1.5 * 7/8
  EXPECT_NEAR(s.lr_at(6), 1.625, kTol);    // p = 2/8
  EXPECT_NEAR(s.lr_at(8), 1.25, kTol);     // p = 1/2
  EXPECT_NEAR(s.lr_at(11), 0.6875, kTol);  // p = 7/8: 0.5 + 1.5 / 8
  EXPECT_NEAR(s.lr_at(12), 0.5, kTol);
  EXPECT_NEAR(s.lr_at(13), 0.5, kTol);     // past the end: the floor
}

TEST(LrSchedule, CosineWarmsUpThenFollowsHalfACosineToTheFloor) {
  const LrSchedule s = shared_case(ScheduleKind::Cosine);
  expect_warmup(s);
  EXPECT_NEAR(s.lr_at(5), 1.94290965, kTol);   // p = 1/8: cos(pi/8) = 0.923879533
  EXPECT_NEAR(s.lr_at(6), 1.78033009, kTol);   // p = 1/4: cos(pi/4) = 0.707106781
  EXPECT_NEAR(s.lr_at(8), 1.25, kTol);         // p = 1/2: halfway between peak and floor
  EXPECT_NEAR(s.lr_at(10), 0.719669914, kTol); // p = 3/4: cos(3pi/4) = -0.707106781
  EXPECT_NEAR(s.lr_at(11), 0.557090351, kTol); // p = 7/8: cos(7pi/8) = -0.923879533
  EXPECT_NEAR(s.lr_at(12), 0.5, kTol);
  EXPECT_NEAR(s.lr_at(20), 0.5, kTol);
}

TEST(LrSchedule, WithoutWarmupOrFloorDecayStartsAtTheFirstStepAndEndsAtZero) {
  // Peak 1, 4 steps, no warmup, floor 0: p = t / 4, so step 1 is already a quarter into the decay.
  const LrSchedule cosine{ScheduleKind::Cosine, 1.0f, 0, 4, 0.0f};
  EXPECT_NEAR(cosine.lr_at(1), 0.853553391, kTol);  // 0.5 (1 + cos(pi/4))
  EXPECT_NEAR(cosine.lr_at(2), 0.5, kTol);
  EXPECT_NEAR(cosine.lr_at(3), 0.146446609, kTol);  // 0.5 (1 + cos(3pi/4))
  EXPECT_NEAR(cosine.lr_at(4), 0.0, kTol);
  const LrSchedule linear{ScheduleKind::Linear, 1.0f, 0, 4, 0.0f};
  EXPECT_NEAR(linear.lr_at(1), 0.75, kTol);
  EXPECT_NEAR(linear.lr_at(4), 0.0, kTol);
}

}  // namespace
}  // namespace zero::optim
