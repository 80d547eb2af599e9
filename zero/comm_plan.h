// Elements each collective moves per optimizer step, by stage and accumulation k, in comm_report()'s
// counting convention (reduce-scatter and all-gather count the full element count, an all-reduce twice
// its count), and the bytes a rank puts on the wire for them with ring algorithms ((W - 1) / W of the
// counted elements). Psi = partition.total_padded; split groups (the embedding in pieces) are not
// gathered for backward. The engine comm tests check the counts at the MPI boundary.
//   stage 0: all-reduce 2 Psi        stage 1: reduce-scatter Psi + all-gather Psi
//   stage 2: reduce-scatter k Psi + all-gather Psi
//   stage 3: reduce-scatter k Psi + all-gather k (2 Psi - split)
// One rank: no reductions where they are in place (buffer_plan.h reductions_in_place), no gathers at stage 3.
// Hybrid sharding over R shard groups (zero/engine.h; `part` is then a group's): the above inside each group, and
// apart from it, on the link between the groups, one all-reduce a step of each rank's owned accumulator range
// (stage 0: Psi; stages 1-3: Psi / W) in the reduce dtype (buffer_plan.h replica_reduction_buffered).
#pragma once
#include <cstdint>

#include "zero/engine_config.h"
#include "zero/partition.h"

namespace zero {

struct StepTraffic {
  uint64_t all_reduce = 0, reduce_scatter = 0, all_gather = 0;  // elements, counted as comm_report()
  double wire_bytes = 0;                                         // per rank per step, ring algorithms
  // wire_bytes by the phase the engine issues them in (what compute beside them can hide):
  //   forward_bytes        each micro-step's forward: stage 3's gathers (Psi)
  //   backward_bytes       each micro-step's backward: the reductions at stages 2-3 (Psi), stage 3's
  //                        gathers again (Psi - split)
  //   last_backward_bytes  the last micro-step's backward only: the reductions at stages 0-1
  //   after_step_bytes     after the optimizer step: stages 1-2's parameter all-gather (Psi)
  // wire_bytes = k (forward_bytes + backward_bytes) + last_backward_bytes + after_step_bytes.
  double forward_bytes = 0, backward_bytes = 0, last_backward_bytes = 0, after_step_bytes = 0;
  // Hybrid sharding: elements all-reduced across the replicas (counted as replica_comm_report()), and the bytes a
  // rank puts on that link for them (a ring over R: 2 (R - 1) / R of the range), during the last micro-step's
  // backward. Not part of wire_bytes.
  uint64_t replica_all_reduce = 0;
  double replica_wire_bytes = 0;
};

StepTraffic plan_step_traffic(const EngineConfig& cfg, const Partition& part, int accum_steps, int replicas = 1);

}  // namespace zero
