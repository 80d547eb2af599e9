#include "pmtrain/render_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "pmtrain/commands.h"
#include "pmtrain/data_setup.h"
#include "pmtrain/pair_lines.h"
#include "pmtrain/paths.h"

namespace zero::pmtrain {

int run_render(const RenderArgs& a) {
  const Config cfg = a.config.path.empty() ? parse_config("", "(defaults)", a.config.overrides) : load_resolved_config(a.config);
  const std::string data_path = existing_path(a.data, "--data");
  const data::DataConfig dc = data_config(cfg.data, {data_path});
  std::ofstream file;
  std::ostream& out = out_stream(a.out, file);
  int64_t pairs = 0, skipped = 0;
  // error_handler_t::replace: a text cut inside a UTF-8 sequence by the data is shown, not a crash.
  auto row = [&](const nlohmann::ordered_json& j) { out << j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n"; };
  const int64_t lines = for_each_pair_line(
      data_path, dc.reader,
      {.on_pair =
           [&](int64_t n, data::PairText& pair) {
             ++pairs;
             nlohmann::ordered_json j = {{"line", n}, {"chosen", pair.chosen}, {"rejected", pair.rejected}};
             if (!dc.reader.margin_field.empty()) j["margin"] = pair.margin;
             row(j);
           },
       .on_skip =
           [&](int64_t n, std::string why) {
             ++skipped;
             row({{"line", n}, {"skipped", why}});
           },
       .before_fail = [&] { out.flush(); }});
  finish_out(out, file, a.out);
  fprintf(stderr, "render: %lld lines of %s: %lld pairs, %lld lines skipped%s\n", (long long)lines, data_path.c_str(),
          (long long)pairs, (long long)skipped, a.out.empty() ? "" : fmt::format(" -> {}", absolute_path(a.out)).c_str());
  return 0;
}

}  // namespace zero::pmtrain
