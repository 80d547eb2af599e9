#include "pmtrain/score_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/batcher.h"
#include "data/tokenizer.h"
#include "pmtrain/model_setup.h"
#include "model/reward_model.h"
#include "pmtrain/backend_setup.h"
#include "pmtrain/commands.h"
#include "pmtrain/data_setup.h"
#include "pmtrain/pair_lines.h"
#include "pmtrain/metrics.h"
#include "pmtrain/paths.h"
#include "pmtrain/planner.h"
#include "pmtrain/progress.h"
#include "pmtrain/score_passes.h"

namespace zero::pmtrain {

namespace {
constexpr int64_t kDefaultMicroPairs = 8;  // pairs per forward pass with neither a training batch nor batch.eval_micro

// Pairs (or tokens) per forward pass, and why: with a training batch (batch.micro or batch.micro_tokens) the
// evaluation batch of `pmtrain eval`, sized by the memory planned for a training micro-batch unless
// batch.eval_micro(_tokens) says (planner.h eval_batch); without one (an HF directory scored with the
// defaults), batch.eval_micro or kDefaultMicroPairs.
std::pair<EvalBatch, const char*> score_batch(const Config& cfg, const model::Qwen3Config& qc) {
  if (cfg.batch.micro > 0 || cfg.batch.micro_tokens > 0) {
    const bool set = cfg.batch.eval_micro + cfg.batch.eval_micro_tokens > 0;
    return {eval_batch(cfg, qc, model_device(cfg), cfg.batch.micro),
            set ? "as set" : "what the training micro-batch's activation memory holds"};
  }
  if (cfg.batch.eval_micro > 0) return {EvalBatch{cfg.batch.eval_micro, 0}, "as set"};
  return {EvalBatch{kDefaultMicroPairs, 0}, "the default without a training batch"};
}

// What a long score has done, on stderr (stdout may hold the rows) every `every_s` seconds: the share of the
// file read, lines, pairs scored, pairs/s and the ETA the share read gives (none when the size is unknown).
class ScoreProgress {
 public:
  explicit ScoreProgress(double every_s) : clock_(every_s) {}
  void after_line(int64_t line, double fraction_read, int64_t scored) {
    if (!clock_.due()) return;
    const double rate = double(scored) / clock_.elapsed_s();
    if (fraction_read < 0) {
      fprintf(stderr, "score: %lld lines read, %lld pairs scored, %.1f pairs/s\n", (long long)line,
              (long long)scored, rate);
    } else {
      fprintf(stderr, "score: %.0f%% of the file read, %lld lines, %lld pairs scored, %.1f pairs/s, ETA %s\n",
              100.0 * fraction_read, (long long)line, (long long)scored, rate, clock_.eta(fraction_read).c_str());
    }
    fflush(stderr);
  }

 private:
  Progress clock_;
};

struct Row {
  int64_t line = 0;
  int64_t pair = -1;    // index in the pending dataset, or -1 when skipped
  std::string skipped;  // why
};
}  // namespace

int run_score(const ScoreArgs& a) {
  ZERO_REQUIRE(!a.config.path.empty() || !a.weights.checkpoint.empty() || !a.weights.model.empty() || a.weights.init,
               ConfigError,
               "which weights? give CONFIG (the newest checkpoint of its run.dir), --checkpoint PATH, "
               "--model HF_DIR or --init");
  Config cfg = a.config.path.empty() ? parse_config("", "(defaults)", a.config.overrides) : load_resolved_config(a.config);
  resolve_rank_threads(cfg, 1);  // one process
  require_backend_here(cfg, 0);  // one line, before anything is read
  const WeightsChoice w = choose_weights(a.weights, cfg);
  fprintf(stderr, "score: weights: %s\n", w.description.c_str());
  const std::string data_path = existing_path(a.data, "--data");
  const ScoringModel sm = load_scoring_model(w, cfg);
  data::Tokenizer tok =
      data::Tokenizer::from_file(a.tokenizer.empty() ? existing_path(sm.tokenizer, "tokenizer")
                                                     : existing_path(a.tokenizer, "--tokenizer"));
  const data::DataConfig dc = data_config(cfg.data, {data_path});
  // The model on the config's backend (cuda: a device copy of the weights in zero.param_dtype's mode).
  ScoringBackend backend = make_scoring_backend(cfg, *sm.params);
  const model::Qwen3RewardModel m(sm.config, reward_model_options(cfg), std::move(backend.model_ops));
  model::ParamAccess& weights = backend.params ? *backend.params : *sm.params;
  if (cfg.backend != Backend::Cpu) fprintf(stderr, "score: backend %s\n", backend.description.c_str());

  std::ofstream file;
  std::ostream& out = out_stream(a.out, file);

  // Lines are read in order and held until their pairs are scored, so rows leave in input order however
  // a batch orders its pairs; the pairs wait in `pending` until their pass runs (score_passes.h).
  data::PairDataset pending;
  data::PairEncoder encoder(dc, tok, pending);
  std::vector<Row> rows;
  int64_t scored = 0, skipped = 0, forward_passes = 0;
  std::string first_skip;
  data::BatchConfig bc = batch_config(cfg.data);
  bc.layout = data::BatchLayout::Packed;  // only real tokens computed, whatever the training layout
  const auto [per_pass, why] = score_batch(cfg, sm.config);
  ScorePasses passes(per_pass);
  ScoreProgress progress(cfg.run.eval_progress_s);
  std::vector<float> rewards;  // chosen, rejected of each pending pair, set when its pass has run
  // Runs the passes that are ready (all: every pending pair), then writes the rows up to the first one whose
  // pair still waits and drops the pairs scored.
  auto score_ready = [&](bool all) {
    const std::vector<std::vector<int64_t>> ready = passes.take(all);
    rewards.resize(size_t(2 * pending.num_pairs()));
    int64_t done = 0;
    for (const std::vector<int64_t>& ids : ready) {
      const data::PairBatch batch = data::make_batch(pending, ids, {}, bc);
      const model::RewardOutput r = m.forward(batch, weights);
      for (int64_t p = 0; p < batch.num_pairs(); ++p) {
        rewards[2 * batch.pair_ids[p]] = r.rewards[2 * p];
        rewards[2 * batch.pair_ids[p] + 1] = r.rewards[2 * p + 1];
      }
      done += int64_t(ids.size());
      ++forward_passes;
    }
    size_t written = 0;
    for (; written < rows.size() && rows[written].pair < done; ++written) {  // a skipped line's pair is -1
      const Row& row = rows[written];
      nlohmann::json j = {{"line", row.line}};
      if (row.pair < 0) j["skipped"] = row.skipped;
      else j.update({{"chosen", rewards[2 * row.pair]}, {"rejected", rewards[2 * row.pair + 1]}});
      out << j.dump() << "\n";
    }
    if (written > 0) out.flush();
    rows.erase(rows.begin(), rows.begin() + ptrdiff_t(written));
    for (Row& row : rows)
      if (row.pair >= 0) row.pair -= done;
    pending.drop_first(done);
    rewards.erase(rewards.begin(), rewards.begin() + 2 * done);
  };
  auto skip = [&](int64_t line, std::string why) {
    if (skipped++ == 0) first_skip = fmt::format("line {}: {}", line, why);
    rows.push_back({line, -1, std::move(why)});
  };

  const int64_t lines = for_each_pair_line(
      data_path, dc.reader,
      {.on_pair =
           [&](int64_t n, data::PairText& pair) {
             if (!encoder.add(pair)) {
               skip(n, fmt::format("longer than data.max_len {} tokens (data.too_long is drop)", dc.max_len));
             } else {
               rows.push_back({n, pending.num_pairs() - 1, ""});
               ++scored;
               passes.add(data::pair_token_cost(pending, pending.num_pairs() - 1, bc));
             }
             score_ready(false);
           },
       .on_skip = [&](int64_t n, std::string why) { skip(n, std::move(why)); },
       .before_fail = [&] { score_ready(true); },  // the rows before it are good
       .after_line = [&](int64_t n, double fraction) { progress.after_line(n, fraction, scored - passes.waiting()); }});
  score_ready(true);
  finish_out(out, file, a.out);
  fprintf(stderr, "score: %lld lines of %s: %lld pairs scored, %lld lines skipped%s%s; %lld forward passes of %s%s (%s)\n",
          (long long)lines, data_path.c_str(), (long long)scored, (long long)skipped,
          skipped ? fmt::format(" (first: {})", first_skip).c_str() : "",
          a.out.empty() ? "" : fmt::format(" -> {}", absolute_path(a.out)).c_str(), (long long)forward_passes,
          per_pass.tokens > 0 ? "at most " : "", per_pass.describe().c_str(), why);
  return 0;
}

}  // namespace zero::pmtrain
