// The data pipeline's settings from a config's data section: one translation of data.* (format,
// bad_lines, too_long, fields, end token, max_len; the batch layout) for training, eval and `pmtrain
// score`. The enum keys arrive parsed (config.cpp), so nothing here can fail.
#pragma once
#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/pair_dataset.h"
#include "data/sampler.h"
#include "pmtrain/config.h"

namespace zero::pmtrain {

// Reader and length policy for `files`.
data::DataConfig data_config(const DataSection& d, const std::vector<std::string>& files);
// How micro-batches are laid out (data.layout, pad_to, pack_row_len, share_prompt).
data::BatchConfig batch_config(const DataSection& d);
// The tokenized-dataset cache file of a split ("train", "test") read with dc: data.cache_dir, keyed by the
// data settings and the tokenizer (data/token_cache.h), so training, eval and `pmtrain plan` share it.
std::string dataset_cache_file(const DataSection& d, const data::DataConfig& dc, const std::string& split);
// The training sampler's settings: run.seed, the resolved batch, data.shuffle / bucket_by_length /
// remainder, batch.micro_tokens.
data::SamplerConfig sampler_config(const Config& cfg, const ResolvedBatch& batch);

}  // namespace zero::pmtrain
