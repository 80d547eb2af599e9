#include "pmtrain/data_setup.h"

#include <filesystem>

#include <fmt/format.h>

#include "data/token_cache.h"

namespace zero::pmtrain {

std::string dataset_cache_file(const DataSection& d, const data::DataConfig& dc, const std::string& split) {
  const uint64_t key = data::dataset_cache_key(dc, d.tokenizer);
  return (std::filesystem::path(d.cache_dir) / fmt::format("{}_{:016x}.bin", split, key)).string();
}

data::DataConfig data_config(const DataSection& d, const std::vector<std::string>& files) {
  data::DataConfig dc;
  dc.files = files;
  dc.reader.prompt_field = d.prompt_field;
  dc.reader.chosen_field = d.chosen_field;
  dc.reader.rejected_field = d.rejected_field;
  dc.reader.margin_field = d.margin_field;
  dc.reader.mode = d.format;
  dc.reader.bad_lines = d.bad_lines;
  dc.end_token = d.end_token;
  dc.max_len = d.max_len;
  dc.too_long = d.too_long;
  return dc;
}

data::BatchConfig batch_config(const DataSection& d) {
  data::BatchConfig bc;
  bc.layout = d.layout;
  bc.pad_to = d.pad_to;
  bc.pack_row_len = d.pack_row_len;
  bc.share_prompt = d.share_prompt;
  return bc;
}

data::SamplerConfig sampler_config(const Config& cfg, const ResolvedBatch& batch) {
  data::SamplerConfig sc;
  sc.seed = cfg.run.seed;
  sc.global_batch = batch.global;
  sc.accum = batch.accum;
  sc.shuffle = cfg.data.shuffle;
  sc.bucket_by_length = cfg.data.bucket_by_length;
  sc.remainder = cfg.data.remainder;
  sc.micro_tokens = cfg.batch.micro_tokens;
  sc.world_invariant = cfg.zero.world_invariant;
  return sc;
}

}  // namespace zero::pmtrain
