// The full (unsharded, unpadded) fp32 master, m and v of every group, on every rank: for tests and
// state dumps that compare runs bit for bit across world sizes and stages. Collective at stages 1-3.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "zero/engine.h"

namespace zero::checkpoint {

struct FullState {
  int64_t optimizer_step = 0;
  std::vector<std::vector<float>> master, m, v;  // [group][numel]
  bool operator==(const FullState& o) const;      // bitwise (memcmp), NaNs included
};

FullState gather_full_state(Engine& e);
// Raw dump: int64 optimizer step, then per group master, m, v (fp32, numel each). Plain file write.
void write_full_state(const std::string& path, const FullState& s);

}  // namespace zero::checkpoint
