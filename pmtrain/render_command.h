// `pmtrain render`: the text of every pair of one JSONL(.gz) file exactly as training tokenizes it (the
// prompt field joined, message lists and chat mode rendered in the chat template; the end token follows
// it as an id), as one JSON row per input line in input order: {"line": N, "chosen": text, "rejected":
// text}, or {"line": N, "skipped": why} for a blank or malformed line. Data settings come from data.*
// (CONFIG or --set), so a user sees what a config's data.prompt_field / data.format make of their file
// before training on it. No model, no tokenizer, no MPI.
#pragma once
#include "pmtrain/cli.h"

namespace zero::pmtrain {

int run_render(const RenderArgs& a);

}  // namespace zero::pmtrain
