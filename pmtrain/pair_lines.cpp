#include "pmtrain/pair_lines.h"

#include "core/check.h"
#include "data/line_reader.h"

namespace zero::pmtrain {

int64_t for_each_pair_line(const std::string& path, const data::HhReaderConfig& cfg, const PairLineHandlers& h) {
  data::LineReader reader(path);
  std::string line;
  data::PairText pair;
  int64_t lines = 0;
  while (reader.next(line)) {
    const int64_t n = reader.line_number();
    ++lines;
    if (line.find_first_not_of(" \t") == std::string::npos) {
      h.on_skip(n, "blank line");
    } else if (const auto bad = data::parse_hh_line(line, cfg, pair)) {
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
  }
  return lines;
}

}  // namespace zero::pmtrain
