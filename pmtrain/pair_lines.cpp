#include "pmtrain/pair_lines.h"

#include "core/check.h"

namespace zero::pmtrain {

int64_t for_each_pair_line(const std::string& path, const data::HhReaderConfig& cfg, const PairLineHandlers& h) {
  int64_t lines = 0;
  data::for_each_hh_line(path, cfg, [&](int64_t n, bool blank, const data::BadLine* bad, data::PairText& pair) {
    ++lines;
    if (blank) {
      h.on_skip(n, "blank line");
    } else if (bad) {
      if (cfg.bad_lines == data::BadLinePolicy::Fail) {
        h.before_fail();
        throw InputError(fmt::format(
            "{}:{}: {} (data.bad_lines is fail; --set data.bad_lines=skip reports such lines and goes on)", path, n,
            bad->why));
      }
      h.on_skip(n, bad->why);
    } else {
      h.on_pair(n, pair);
    }
  }, h.after_line);
  return lines;
}

}  // namespace zero::pmtrain
