#include "zero/comm_plan.h"

#include "core/dtype.h"
#include "zero/buffer_plan.h"

namespace zero {

StepTraffic plan_step_traffic(const EngineConfig& cfg, const Partition& part, int k, int replicas) {
  const uint64_t psi = part.total_padded, K = uint64_t(k);
  uint64_t split = 0;
  for (const GroupLayout& g : part.groups)
    if (g.split()) split += g.padded;
  StepTraffic t;
  switch (cfg.stage) {
    case 0: t.all_reduce = 2 * psi; break;
    case 1: t.reduce_scatter = psi, t.all_gather = psi; break;
    case 2: t.reduce_scatter = K * psi, t.all_gather = psi; break;
    default:  // one rank reads its shards in place (buffer_plan.h): no gathers
      t.reduce_scatter = K * psi, t.all_gather = gathers_in_place(part) ? 0 : K * (2 * psi - split);
      break;
  }
  if (reductions_in_place(cfg, part)) t.all_reduce = t.reduce_scatter = 0;  // one rank: folded, not reduced
  // Reductions travel in the reduce dtype, gathers in the parameters' dtype; a ring moves (W - 1) / W.
  const double W = double(part.world), ring = (W - 1) / W;
  const double r = double(dtype_size(cfg.reduce_dtype)), p = double(dtype_size(cfg.param_dtype));
  const double reductions = ring * double(t.all_reduce + t.reduce_scatter) * r, gathers = ring * double(t.all_gather) * p;
  t.wire_bytes = reductions + gathers;
  switch (cfg.stage) {
    case 0:
    case 1: t.last_backward_bytes = reductions, t.after_step_bytes = gathers; break;
    case 2: t.backward_bytes = reductions / double(K), t.after_step_bytes = gathers; break;
    default: {  // per micro-step: Psi gathered for forward, Psi - split again for backward (none read in place)
      const bool gathered = t.all_gather > 0;
      t.forward_bytes = gathered ? ring * double(psi) * p : 0;
      t.backward_bytes = reductions / double(K) + (gathered ? ring * double(psi - split) * p : 0);
      break;
    }
  }
  if (replicas > 1) {
    const uint64_t owned = cfg.stage == 0 ? psi : part.total_shard;
    const double R = double(replicas);
    t.replica_all_reduce = 2 * owned;
    t.replica_wire_bytes = 2 * (R - 1) / R * double(owned) * double(dtype_size(cfg.reduce_dtype));
  }
  return t;
}

}  // namespace zero
