// `pmtrain score`: the chosen and rejected reward of every pair of one JSONL(.gz) file, as one JSON row
// per input line in input order: {"line": N, "chosen": r, "rejected": r}, or {"line": N, "skipped": why}
// for a blank, malformed or (data.too_long: drop) overlong line; N is the 1-based line of the file.
// data.bad_lines: fail stops at the first malformed line instead. No MPI: one process, full fp32 weights.
#pragma once
#include "pmtrain/cli.h"

namespace zero::pmtrain {

int run_score(const ScoreArgs& a);

}  // namespace zero::pmtrain
