// Padding fraction of the batch layouts over one epoch of the bundled hh-rlhf pairs (train + test):
// padded without bucketing, padded with length bucketing (within each global batch, or windows of
// several steps), and packed rows, with and without shared prompts (real_tokens: the tokens computed).
// Micro-batches of 8 pairs on one rank; global batch 8, 64 or 128 pairs (accum = global / 8).
// usage: data_padding_bench [--chat]
#include <cstdio>
#include <cstring>

#include "data/batcher.h"
#include "data/sampler.h"
#include "data/tokenizer.h"

using namespace zero::data;

int main(int argc, char** argv) {
  const bool chat = argc > 1 && !std::strcmp(argv[1], "--chat");
  const std::string assets = ZERO_DATA_ASSETS;
  Tokenizer tok = Tokenizer::from_file(assets + "/qwen3/tokenizer.json");
  DataConfig dc;
  dc.files = {assets + "/hh-rlhf/harmless-base/train.jsonl.gz", assets + "/hh-rlhf/harmless-base/test.jsonl.gz"};
  dc.max_len = 2048;
  if (chat) dc.reader.mode = TextMode::Chat;
  const PairDataset ds = build_pair_dataset(dc, tok);
  int64_t longest = 0, total = 0;
  for (int64_t s = 0; s < 2 * ds.num_pairs(); ++s) {
    longest = std::max(longest, ds.seq_len(s));
    total += ds.seq_len(s);
  }
  std::printf("# data_padding_bench: %lld pairs (%s), mean %.1f tokens per sequence, max %lld; pad_to 8; "
              "8 pairs per micro-batch; one epoch, remainder padded\n",
              (long long)ds.num_pairs(), chat ? "chat mode" : "raw transcripts", double(total) / double(2 * ds.num_pairs()),
              (long long)longest);
  std::printf("%-8s %-36s %10s %14s %14s\n", "global", "layout", "pad_frac", "real_tokens", "grid_tokens");
  struct Mode {
    const char* name;
    bool bucket;
    int64_t window;  // bucket_window in steps
    BatchLayout layout;
    int64_t pack_row_len;
    bool share_prompt = false;
  };
  const Mode modes[] = {
      {"padded, shuffled (no bucketing)", false, 1, BatchLayout::Padded, 0},
      {"padded, bucketed in global batch", true, 1, BatchLayout::Padded, 0},
      {"padded, bucketed, window 16 steps", true, 16, BatchLayout::Padded, 0},
      {"padded, bucketed, window = epoch", true, 1 << 20, BatchLayout::Padded, 0},
      {"packed, row 2048, shuffled", false, 1, BatchLayout::Packed, 2048},
      {"packed, row 4096, shuffled", false, 1, BatchLayout::Packed, 4096},
      {"packed, row 2048, shared prompts", false, 1, BatchLayout::Packed, 2048, true},
  };
  for (const int64_t global : {8, 64, 128}) {
    for (const Mode& m : modes) {
      SamplerConfig sc;
      sc.seed = 2026;
      sc.global_batch = global;
      sc.accum = global / 8;
      sc.bucket_by_length = m.bucket;
      sc.bucket_window = m.window;
      sc.remainder = RemainderPolicy::Pad;
      BatchConfig bc;
      bc.layout = m.layout;
      bc.pack_row_len = m.pack_row_len;
      bc.share_prompt = m.share_prompt;
      PairSampler sampler(sc, ds.num_pairs(), pair_tokens(ds, bc), 0, 1);
      int64_t real = 0, grid = 0;
      for (int64_t s = 0; s < sampler.steps_per_epoch(); ++s)
        for (const auto& mb : sampler.next_step().micro) {
          const PairBatch b = make_batch(ds, mb.pair_ids, mb.pair_mask, bc);
          real += b.real_tokens();
          grid += b.rows * b.row_len;
        }
      std::printf("%-8lld %-36s %10.3f %14lld %14lld\n", (long long)global, m.name, 1.0 - double(real) / double(grid),
                  (long long)real, (long long)grid);
    }
  }
  return 0;
}
