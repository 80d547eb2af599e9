#include "checkpoint/full_state.h"

#include <cstring>

#include "checkpoint/file_io.h"

namespace zero::checkpoint {

bool FullState::operator==(const FullState& o) const {
  auto same = [](const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    if (a.size() != b.size()) return false;
    for (size_t g = 0; g < a.size(); ++g)
      if (a[g].size() != b[g].size() || std::memcmp(a[g].data(), b[g].data(), a[g].size() * sizeof(float)) != 0)
        return false;
    return true;
  };
  return optimizer_step == o.optimizer_step && same(master, o.master) && same(m, o.m) && same(v, o.v);
}

FullState gather_full_state(Engine& e) {
  FullState s;
  s.optimizer_step = e.optimizer_step();
  const Partition& p = e.partition();
  for (int g = 0; g < int(p.groups.size()); ++g) {
    s.master.push_back(e.full_optimizer_array(g, OptimArray::Master));
    s.m.push_back(e.full_optimizer_array(g, OptimArray::M));
    s.v.push_back(e.full_optimizer_array(g, OptimArray::V));
  }
  return s;
}

void write_full_state(const std::string& path, const FullState& s) {
  std::vector<Segment> segs{{&s.optimizer_step, sizeof(s.optimizer_step)}};
  for (size_t g = 0; g < s.master.size(); ++g)
    for (const auto* a : {&s.master[g], &s.m[g], &s.v[g]}) segs.push_back({a->data(), a->size() * sizeof(float)});
  write_file(path, segs);
}

}  // namespace zero::checkpoint
