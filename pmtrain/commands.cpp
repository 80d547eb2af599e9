#include "pmtrain/commands.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/batcher.h"
#include "data/pair_dataset.h"
#include "data/tokenizer.h"
#include "model/hf_import.h"
#include "model/reward_model.h"
#include "pmtrain/model_setup.h"
#include "pmtrain/planner.h"
#include "pmtrain/stop_signals.h"
#include "pmtrain/trainer.h"

namespace zero::pmtrain {
namespace fs = std::filesystem;

namespace {
struct ConfigArgs {
  std::string path;
  std::vector<std::string> overrides;
  std::vector<std::pair<std::string, std::string>> flags;  // other --flag value pairs
};

ConfigArgs parse_config_args(const std::vector<std::string>& args) {
  ConfigArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    if (s == "--set") {
      ZERO_REQUIRE(i + 1 < args.size(), ConfigError, "--set needs key=value");
      a.overrides.push_back(args[++i]);
    } else if (s.rfind("--set=", 0) == 0) {
      a.overrides.push_back(s.substr(6));
    } else if (s.rfind("--", 0) == 0) {
      ZERO_REQUIRE(i + 1 < args.size(), ConfigError, "{} needs a value", s);
      a.flags.emplace_back(s, args[++i]);
    } else {
      ZERO_REQUIRE(a.path.empty(), ConfigError, "unexpected argument '{}' (one CONFIG.yaml only)", s);
      a.path = s;
    }
  }
  ZERO_REQUIRE(!a.path.empty(), ConfigError, "no CONFIG.yaml given");
  return a;
}

std::string flag(const std::vector<std::pair<std::string, std::string>>& flags, const std::string& name,
                 const std::string& fallback = "") {
  for (const auto& [k, v] : flags)
    if (k == name) return v;
  return fallback;
}

void reject_unknown_flags(const ConfigArgs& a, std::initializer_list<const char*> known) {
  for (const auto& [k, v] : a.flags) {
    bool ok = false;
    for (const char* n : known) ok |= k == n;
    ZERO_REQUIRE(ok, ConfigError, "unknown option '{}'", k);
  }
}
}  // namespace

int run_train(const std::vector<std::string>& args, MpiRuntime& mpi) {
  const ConfigArgs a = parse_config_args(args);
  reject_unknown_flags(a, {"--resume"});
  std::vector<std::string> overrides = a.overrides;
  if (const std::string r = flag(a.flags, "--resume"); !r.empty()) overrides.push_back("run.resume=" + r);
  const Config cfg = load_config(a.path, overrides);
  auto comm = mpi.world_communicator();
  install_stop_signals();
  Trainer trainer(cfg, mpi.info(), *comm);
  return trainer.train();
}

int run_eval(const std::vector<std::string>& args, MpiRuntime& mpi) {
  const ConfigArgs a = parse_config_args(args);
  reject_unknown_flags(a, {});
  const Config cfg = load_config(a.path, a.overrides);
  auto comm = mpi.world_communicator();
  Trainer trainer(cfg, mpi.info(), *comm);
  const PairStats ev = trainer.evaluate();
  if (mpi.info().rank == 0)
    printf("eval | loss %.4f | acc %.3f | chosen %.4f | rejected %.4f | margin %.4f | %lld pairs\n", ev.loss(),
           ev.accuracy(), ev.chosen(), ev.rejected(), ev.chosen() - ev.rejected(), (long long)ev.pairs);
  return 0;
}

int run_plan(const std::vector<std::string>& args) {
  const ConfigArgs a = parse_config_args(args);
  reject_unknown_flags(a, {"--world", "--ranks-per-node"});
  const Config cfg = load_config(a.path, a.overrides);
  const int world = std::stoi(flag(a.flags, "--world", std::to_string(cfg.batch.world > 0 ? cfg.batch.world : 1)));
  const int per_node = std::stoi(flag(a.flags, "--ranks-per-node", std::to_string(world)));
  const auto tok = data::Tokenizer::from_file(cfg.data.tokenizer);
  const auto qc = resolve_model_config(cfg.model, tok.vocab_size());
  model::RewardModelOptions mo;
  const model::Qwen3RewardModel m(qc, mo);
  const ResolvedBatch b = resolve_batch({cfg.batch.global, cfg.batch.micro, cfg.batch.accum}, world);
  const MemoryPlan plan = plan_memory(cfg, qc, engine_groups(m.groups()), world, per_node, b.micro);
  printf("%s: world %d, stage %lld, micro %lld x accum %lld\n%s\n", a.path.c_str(), world, (long long)cfg.zero.stage,
         (long long)b.micro, (long long)b.accum, plan.describe().c_str());
  require_fits(plan, a.path);
  printf("fits\n");
  return 0;
}

int run_score(const std::vector<std::string>& args) {
  std::string model_dir, data_file, out_file, tok_path, format = "raw";
  int64_t max_len = 4096, micro = 8;
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string& k = args[i];
    const std::string& v = args[i + 1];
    if (k == "--model") model_dir = v;
    else if (k == "--data") data_file = v;
    else if (k == "--out") out_file = v;
    else if (k == "--tokenizer") tok_path = v;
    else if (k == "--format") format = v;
    else if (k == "--max-len") max_len = std::stoll(v);
    else throw ConfigError(fmt::format("score: unknown option '{}'", k));
  }
  ZERO_REQUIRE(!model_dir.empty() && !data_file.empty(), ConfigError, "score needs --model DIR and --data FILE");
  if (tok_path.empty())
    tok_path = fs::exists(fs::path(model_dir) / "tokenizer.json") ? (fs::path(model_dir) / "tokenizer.json").string()
                                                                  : "data/assets/qwen3/tokenizer.json";
  auto tok = data::Tokenizer::from_file(tok_path);
  data::DataConfig dc;
  dc.files = {data_file};
  dc.max_len = max_len;
  ZERO_REQUIRE(format == "raw" || format == "chat", ConfigError, "score: --format must be raw or chat");
  dc.reader.mode = format == "chat" ? data::TextMode::Chat : data::TextMode::Raw;
  const data::PairDataset ds = data::build_pair_dataset(dc, tok);
  model::HfRewardModel hf = model::load_hf_reward_model(model_dir);
  const model::Qwen3RewardModel m(hf.config);
  std::ofstream file;
  if (!out_file.empty()) {
    file.open(out_file);
    ZERO_REQUIRE(file.good(), InputError, "{}: cannot open for writing", out_file);
  }
  std::ostream& out = out_file.empty() ? std::cout : file;
  data::BatchConfig bc;
  bc.layout = data::BatchLayout::Packed;
  for (int64_t first = 0; first < ds.num_pairs(); first += micro) {
    std::vector<int64_t> ids;
    for (int64_t i = first; i < std::min(first + micro, ds.num_pairs()); ++i) ids.push_back(i);
    const data::PairBatch batch = data::make_batch(ds, ids, {}, bc);
    const model::RewardOutput r = m.forward(batch, *hf.params);
    for (int64_t p = 0; p < batch.num_pairs(); ++p)
      out << nlohmann::json{{"index", batch.pair_ids[p]}, {"chosen", r.rewards[2 * p]}, {"rejected", r.rewards[2 * p + 1]}}.dump()
          << "\n";
  }
  return 0;
}

}  // namespace zero::pmtrain
