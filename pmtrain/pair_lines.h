// The lines of one pairs file as `pmtrain score` and `pmtrain render` report them: one row per input line,
// in input order. on_pair(line, pair) for a pair (the texts as the model reads them, before the end token,
// and its margin), on_skip(line, why) for a blank or malformed line; with data.bad_lines fail, the first
// malformed line calls before_fail() (so the rows before it are written) and throws an InputError naming
// the file and line. Lines are 1-based; the reading is data::for_each_hh_line, the reader's own.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "data/hh_rlhf.h"

namespace zero::pmtrain {

struct PairLineHandlers {
  std::function<void(int64_t line, data::PairText& pair)> on_pair;
  std::function<void(int64_t line, std::string why)> on_skip;
  std::function<void()> before_fail = [] {};
  // After each line: its number and how much of the file is read (LineReader::fraction_read; -1 unknown).
  std::function<void(int64_t line, double fraction_read)> after_line = {};
};

// Returns the number of lines read.
int64_t for_each_pair_line(const std::string& path, const data::HhReaderConfig& cfg, const PairLineHandlers& h);

}  // namespace zero::pmtrain
