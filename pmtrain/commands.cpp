#include "pmtrain/commands.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "checkpoint/manifest.h"
#include "checkpoint/verify.h"
#include "comm/hybrid_groups.h"
#include "comm/launch_env.h"
#include "core/check.h"
#include "data/tokenizer.h"
#include "model/reward_model.h"
#include "pmtrain/config_changes.h"
#include "pmtrain/engine_assembly.h"
#include "pmtrain/model_setup.h"
#include "pmtrain/paths.h"
#include "pmtrain/planner.h"
#include "pmtrain/trainer.h"

namespace zero::pmtrain {

namespace {
// What `train --dry-run` prints: the batch at this world size and the memory per rank on this node (on the
// CUDA backend the host's share, then the plan per rank on its GPU, which a dry run does not check: it opens
// no device); ConfigError (after the plan) when the node cannot hold its ranks.
void print_plan(const Config& given, int world, int per_node) {
  const auto tok = data::Tokenizer::from_file(given.data.tokenizer);
  const auto qc = resolve_model_config(given.model, tok.vocab_size());
  const model::Qwen3RewardModel m(qc, reward_model_options(given));
  const ResolvedBatch b = run_batch(given, world);  // the trainer's batch (engine_assembly.h)
  const std::vector<GroupInfo> groups = engine_groups(m.groups());
  const PlanDevice device = model_device(given);
  auto host_plan = [&](const Config& c) { return plan_memory(c, qc, groups, world, per_node, b.micro, b.accum); };
  // The auto choices (activation checkpointing, the token budget): on the CPU chosen here as the run will; a
  // GPU's are chosen when the run starts (the plans below take full checkpointing and the least budget).
  const Config cfg = device == PlanDevice::Cpu ? resolve_auto_choices(given, qc.num_layers, world, [&](const Config& c) {
    return node_use(host_plan(c));
  }) : given;
  const MemoryPlan plan = host_plan(cfg);
  constexpr const char* kAtStart = "auto: chosen against the GPUs when the run starts";
  if (cfg.model.checkpointing_auto)
    printf("activation checkpointing %s\n",
           device == PlanDevice::Cpu ? checkpointing_text(cfg.model, qc.num_layers).c_str() : kAtStart);
  if (cfg.batch.micro_tokens_auto)
    printf("batch.micro_tokens %s\n",
           device == PlanDevice::Cpu ? fmt::format("auto: {}", cfg.batch.micro_tokens).c_str() : kAtStart);
  const int64_t budget_pairs = run_batch(cfg, world).micro;  // pairs at max_len the (chosen) budget holds
  const std::string batch =
      cfg.batch.micro_tokens > 0
          ? fmt::format("batch global {} pairs per step, micro-batches of at most {} tokens (accumulation varies per "
                        "step; memory planned for {} pair{} at max_len)",
                        b.global, cfg.batch.micro_tokens, budget_pairs, budget_pairs == 1 ? "" : "s")
          : fmt::format("batch global {} = micro {} x accum {} x world {}", b.global, b.micro, b.accum, world);
  printf("%s: world %d (%d per node), %s, %s\n%s%s\n", cfg.source.c_str(), world, per_node,
         stage_text(cfg, world).c_str(), batch.c_str(), device == PlanDevice::Gpu ? "host memory " : "", plan.describe().c_str());
  if (device == PlanDevice::Gpu)
    printf("GPU memory %s (checked against the GPUs when the run starts)\n",
           plan_gpu_memory(cfg, qc, groups, world, b.micro, b.accum, {}).describe().c_str());
  printf("evaluation batches of at most %s per rank\n", eval_batch(given, qc, device, b.micro).describe().c_str());
  fflush(stdout);  // the plans first, then an error about them
  if (device == PlanDevice::Gpu) require_fits(plan, cfg, world);  // the host's share: its own advice
  // The breakdown is printed above: the error says what to change, not the plan again.
  ZERO_REQUIRE(fits_on_node(plan), ConfigError,
               "{}: does not fit on this node (above); try {}{}a smaller batch.micro or more nodes, or compare stages "
               "and GPUs with `pmtrain plan {} --gpu-mem 24GiB,80GiB`",
               cfg.source, sharding_advice(cfg, world), checkpointing_advice(cfg), cfg.source);
  printf("fits\n");
}

int default_world(const Config& cfg) { return cfg.batch.world > 0 ? int(cfg.batch.world) : 1; }

// --dry-run with --resume (run.resume): the checkpoint the run would continue (auto: the newest complete one whose
// files are there at their sizes, as resume auto's first pass finds it; the run also checks their checksums and
// goes to an older one past a corrupted one) and the settings the run would change from the one that saved it.
void print_resume_preview(const Config& cfg) {
  if (cfg.run.resume.empty()) return;
  std::string dir = cfg.run.resume;
  if (dir == "auto") {
    const checkpoint::RunPaths paths(cfg.run.dir);
    const auto step = checkpoint::newest_complete_step(paths, std::numeric_limits<double>::infinity(),
                                                       [](int64_t skip, const std::string& problem) {
                                                         printf("resume auto: step_%lld would be skipped: %s\n",
                                                                (long long)skip, problem.c_str());
                                                       });
    if (!step) {
      printf("resume auto: no checkpoint in %s yet: the run would start fresh\n", cfg.run.dir.c_str());
      return;
    }
    dir = paths.step_dir(*step);
  }
  const checkpoint::Manifest m = checkpoint::Manifest::read(dir);  // a path that is no checkpoint: its error
  printf("resume: from %s: step %lld, saved at world %d stage %d (its checksums are checked when the run starts)\n",
         dir.c_str(), (long long)m.step, m.world * m.shard_groups, m.stage);
  const std::string line = settings_changed_line(m.config, cfg, dir);
  printf("resume: %s\n", line.empty() ? "no setting differs from the run that saved the checkpoint" : line.c_str());
}
}  // namespace

Config load_resolved_config(const ConfigArgs& a) {
  Config cfg = load_config(existing_path(a.path, "config file"), a.overrides);
  resolve_paths(cfg);
  return cfg;
}

int run_train(const TrainArgs& a, MpiRuntime& mpi) {
  ConfigArgs c = a.config;
  if (!a.resume.empty()) c.overrides.push_back("run.resume=" + a.resume);
  const Config cfg = load_resolved_config(c);
  auto comm = mpi.world_communicator();
  comm->set_peer_timeout(cfg.run.collective_timeout_s);  // (stop signals: installed by main, before MPI starts)
  Trainer trainer(cfg, mpi.info(), *comm);
  return trainer.train();
}

int run_dry_run(const TrainArgs& a) {
  ConfigArgs c = a.config;
  if (!a.resume.empty()) c.overrides.push_back("run.resume=" + a.resume);
  Config cfg = load_resolved_config(c);
  const int world = launcher_world().value_or(default_world(cfg));
  // Under a launcher its placement (zero.shard_ranks node, and a warning for groups across nodes, as the run
  // reads MPI's), else one node of them all.
  const std::vector<int> nodes = launcher_node_of_rank(world).value_or(std::vector<int>(size_t(world), 0));
  std::map<int, int> on_node;  // ranks by node: the most on one is what its host memory holds
  for (const int n : nodes) ++on_node[n];
  int per_node = 0;
  for (const auto& [node, ranks] : on_node) per_node = std::max(per_node, ranks);
  resolve_rank_threads(cfg, per_node);  // as the run will on this node (the resolved config records it)
  printf("--- resolved config (dry run: nothing is trained or written) ---\n%s---\n", to_yaml(cfg).c_str());
  print_resume_preview(cfg);
  resolve_shard_ranks(cfg, node_block_ranks(nodes));
  if (const std::string w = shard_placement_warning(cfg, nodes); !w.empty()) printf("%s\n", w.c_str());
  print_plan(cfg, world, per_node);
  return 0;
}

int run_eval(const EvalArgs& a, MpiRuntime& mpi) {
  Config cfg = load_resolved_config(a.config);
  if (!a.data.empty()) {  // these files are the test split: NAME=FILE a named set (data.test_sets), else test_files
    cfg.data.test_files.clear();
    cfg.data.test_sets.clear();
    for (const std::string& f : a.data) {
      const size_t eq = f.find('=');
      if (eq == std::string::npos || std::filesystem::exists(f)) {
        cfg.data.test_files.push_back(existing_path(f, "--data"));
        continue;
      }
      const std::string name = f.substr(0, eq);
      ZERO_REQUIRE(plain_set_name(name), ConfigError,
                   "--data {}: set name '{}' must be letters, digits, '_', '-' or '.' (NAME=FILE)", f, name);
      cfg.data.test_sets[name].push_back(existing_path(f.substr(eq + 1), "--data " + name));
    }
  }
  const WeightsChoice w = choose_weights(a.weights, cfg);
  const bool r0 = mpi.info().rank == 0;
  if (r0) {
    printf("eval: weights: %s\n", w.description.c_str());
    fflush(stdout);
  }
  if (w.kind == WeightsChoice::Kind::HfDir) cfg.model.hf_dir = w.path;
  auto comm = mpi.world_communicator();
  comm->set_peer_timeout(cfg.run.collective_timeout_s);
  Trainer trainer(cfg, mpi.info(), *comm, TrainerRole::Evaluate, w.kind == WeightsChoice::Kind::Checkpoint ? w.path : "");
  const EvalStats ev = trainer.evaluate();
  if (r0) {
    printf("eval | %s\n%s", ev.summary().c_str(), ev.sets_text().c_str());
    // The same record (and number format) as the run's eval lines in metrics.jsonl, for scripts.
    nlohmann::json j = ev.record();
    j.update({{"type", "eval"}, {"weights", w.description}});
    printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace zero::pmtrain
