// Elements each collective moves per optimizer step, by stage and accumulation k, in comm_report()'s
// counting convention (reduce-scatter and all-gather count the full element count, an all-reduce twice
// its count), and the bytes a rank puts on the wire for them with ring algorithms ((W - 1) / W of the
// counted elements). Psi = partition.total_padded; split groups (the embedding in pieces) are not
// gathered for backward. The engine comm tests check the counts at the MPI boundary.
//   stage 0: all-reduce 2 Psi        stage 1: reduce-scatter Psi + all-gather Psi
//   stage 2: reduce-scatter k Psi + all-gather Psi
//   stage 3: reduce-scatter k Psi + all-gather k (2 Psi - split)
#pragma once
#include <cstdint>

#include "zero/engine_config.h"
#include "zero/partition.h"

namespace zero {

struct StepTraffic {
  uint64_t all_reduce = 0, reduce_scatter = 0, all_gather = 0;  // elements, counted as comm_report()
  double wire_bytes = 0;                                         // per rank per step, ring algorithms
};

StepTraffic plan_step_traffic(const EngineConfig& cfg, const Partition& part, int accum_steps);

}  // namespace zero
