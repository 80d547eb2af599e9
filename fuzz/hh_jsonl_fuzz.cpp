// Fuzz target: the preference-pair JSONL(.gz) reader (data/hh_rlhf.h over data/line_reader.h) on an
// arbitrary file (gzip is recognised by its magic bytes, so the fuzzer reaches zlib too), in raw and chat
// mode, without and with a prompt field (strings and message lists) and a margin field (every margin a
// finite float). Bad lines are counted (skip) or an
// InputError naming the file (fail); every non-blank line is either a pair or a bad line, and every
// reason can be written as JSON.
#include <cmath>

#include <nlohmann/json.hpp>

#include "data/hh_rlhf.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zero;
  const std::string path = fuzz::write_scratch(".jsonl", data, size);
  for (const data::TextMode mode : {data::TextMode::Raw, data::TextMode::Chat})
    for (const data::BadLinePolicy policy : {data::BadLinePolicy::Skip, data::BadLinePolicy::Fail})
      for (const char* prompt_field : {"", "prompt"}) {
        data::HhReaderConfig cfg;
        cfg.prompt_field = prompt_field;
        cfg.margin_field = *prompt_field ? "margin" : "";  // the prompt's pass reads margins too
        cfg.mode = mode;
        cfg.bad_lines = policy;
        fuzz::expect_clean_error(path, [&] {
          data::ReadStats stats;
          int64_t pairs = 0;
          data::read_hh_pairs({path}, cfg, stats, [&](data::PairText& p) {
            fuzz::require(std::isfinite(p.margin), "a margin that is not finite passed");
            ++pairs;
          });
          fuzz::require(stats.pairs == pairs && stats.pairs + stats.bad_total() == stats.lines,
                        "line counts do not add up: " + stats.report());
          if (policy == data::BadLinePolicy::Fail) fuzz::require(stats.bad_total() == 0, "a bad line passed under fail");
          // Reasons quote the input and end up in JSON (score's rows): they must be valid UTF-8.
          for (const std::string& why : stats.first_bad) {
            bool writable = true;
            try {
              (void)nlohmann::json(why).dump();
            } catch (const nlohmann::json::exception&) {
              writable = false;
            }
            fuzz::require(writable, "a bad-line reason is not valid UTF-8: " + why);
          }
        });
      }
  std::remove(path.c_str());
  return 0;
}
