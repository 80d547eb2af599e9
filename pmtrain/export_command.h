// `pmtrain export RUN_DIR [--step N] --to OUT_DIR [--dtype bf16|fp32] [--tokenizer FILE] [--no-verify]`:
// a pmtrain checkpoint (any saved world size and stage) -> an HF model directory that transformers'
// AutoModelForSequenceClassification loads: config.json (from the checkpoint's trainer.extra.model_config),
// model.safetensors (the fp32 masters, stored as bf16 or fp32), tokenizer.json and tokenizer_config.json
// (from trainer.extra.tokenizer / tokenizer_config, or --tokenizer), zero_export.json (provenance).
// When model_config has no pad_token_id (or eos_token_id), config.json gets the tokenizer's pad (eos) token:
// HF needs pad_token_id to score batches. No MPI, no engine: one tensor in memory at a time. See model/hf_export.h for atomicity and the
// overwrite policy, checkpoint/full_tensors.h for how the checkpoint is read.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/hf_export.h"
#include "model/qwen3_config.h"

namespace zero::pmtrain {

struct ExportRequest {
  std::string run_dir;           // a run directory (or a step_<N> checkpoint directory)
  std::optional<int64_t> step;   // default: the latest checkpoint
  std::string out_dir;
  DType dtype = DType::BF16;     // F32 or BF16
  std::string tokenizer;         // overrides trainer.extra.tokenizer (its sibling tokenizer_config.json too)
  bool verify_checksums = true;  // xxhash64 of every rank file before reading
  double progress_s = 30;        // a progress line (checksums, then weights: done, rate, ETA) this often; 0 = never
};

struct ExportResult {
  std::string checkpoint_dir;
  int64_t step = 0;
  model::Qwen3Config config;
  model::HfExportReport hf;
  std::vector<std::string> copied;  // extra files written into OUT_DIR (tokenizer.json, ...)
  std::vector<std::string> notes;   // e.g. pad_token_id taken from the tokenizer
};

// Does the export. InputError naming the run dir / checkpoint / file for: no checkpoints, a missing
// step (listing the available ones), a checkpoint without trainer.extra.model_config (not made by
// pmtrain), tensors that disagree with model_config, a missing tokenizer file, a refused OUT_DIR.
ExportResult export_checkpoint(const ExportRequest& request);

// The subcommand (options parsed by cli.h): export, print a one-line summary. Errors propagate (main prints them).
int run_export(const ExportRequest& request);

}  // namespace zero::pmtrain
