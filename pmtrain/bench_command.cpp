#include "pmtrain/bench_command.h"

#include <mpi.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include "comm/bootstrap.h"
#include "comm/hybrid_groups.h"
#include "core/check.h"
#include "core/process_memory.h"
#include "data/batcher.h"
#include "data/sampler.h"
#include "data/tokenizer.h"
#include "pmtrain/backend_setup.h"
#include "pmtrain/data_setup.h"
#include "pmtrain/engine_assembly.h"
#include "pmtrain/metrics.h"
#include "pmtrain/model_flops.h"
#include "pmtrain/model_setup.h"
#include "pmtrain/paths.h"
#include "pmtrain/train_stack.h"
#include "pmtrain/train_step.h"

namespace zero::pmtrain {
namespace {

// The config as the benchmark runs it: sequences of exactly `seq` tokens (data.max_len, which the memory
// plan and token budgets read), `pairs` per step over all ranks, `steps` steps (the LR schedule's length).
// With batch.micro the micro-batch is the config's, capped at the pairs one rank gets.
Config bench_config(const BenchArgs& a, int world) {
  Config cfg = load_config(existing_path(a.config_path, "config file"), a.overrides);
  if (!cfg.model.hf_dir.empty()) cfg.model.hf_dir = existing_model_dir(cfg.model.hf_dir, "model.hf_dir");
  ZERO_REQUIRE(a.steps > a.warmup, ConfigError, "--steps {} must be more than --warmup {} (steps counts the warm-up)",
               a.steps, a.warmup);
  ZERO_REQUIRE(a.pairs >= world, ConfigError, "--pairs-per-step {} is fewer than the {} ranks launched", a.pairs,
               world);
  cfg.data.max_len = a.seq;
  set_provisional_micro_tokens(cfg);  // batch.micro_tokens auto: one pair at this max_len until resolved
  cfg.batch.global = a.pairs;
  cfg.batch.world = 0;
  cfg.batch.accum = 0;
  if (cfg.batch.micro_tokens == 0)
    cfg.batch.micro = std::min(cfg.batch.micro > 0 ? cfg.batch.micro : a.pairs, a.pairs / world);
  cfg.run.steps = a.steps;
  return cfg;
}

// The vocabulary: the model's own (presets, model.vocab_size, an HF config), else the tokenizer's as `pmtrain
// train` takes it (read only then).
model::Qwen3Config bench_model_config(const Config& cfg) {
  const bool needs_tokenizer = cfg.model.hf_dir.empty() && cfg.model.vocab_size == 0 &&
                               (cfg.model.preset == ModelPreset::Tiny || cfg.model.preset == ModelPreset::Custom);
  int64_t tokenizer_vocab = 0;
  if (needs_tokenizer) {
    ZERO_REQUIRE(std::filesystem::exists(absolute_path(cfg.data.tokenizer)), ConfigError,
                 "{}: model.preset {} takes its vocabulary size from data.tokenizer, and {} does not exist; give "
                 "--set model.vocab_size=N",
                 cfg.source, preset_name(cfg.model.preset), absolute_path(cfg.data.tokenizer));
    tokenizer_vocab = data::Tokenizer::from_file(absolute_path(cfg.data.tokenizer)).vocab_size();
  }
  return resolve_model_config(cfg.model, tokenizer_vocab);
}

// steps x pairs synthetic pairs, both answers `seq` seeded random ids in [0, vocab): each step its own.
data::PairDataset synthetic_pairs(int64_t count, int64_t seq, int64_t vocab, uint64_t seed) {
  data::PairDataset ds;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  ds.tokens.resize(size_t(2 * count * seq));
  for (int32_t& t : ds.tokens) t = id(rng);
  ds.offsets.resize(size_t(2 * count + 1));
  for (size_t s = 0; s < ds.offsets.size(); ++s) ds.offsets[s] = int64_t(s) * seq;
  ds.pad_id = 0;
  return ds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double gib(double bytes) { return bytes / double(size_t(1) << 30); }

}  // namespace

int run_bench(const BenchArgs& a, MpiRuntime& mpi) {
  const LaunchInfo& info = mpi.info();
  auto comm = mpi.world_communicator();
  const int W = comm->world();
  const bool r0 = info.rank == 0;
  Config cfg = bench_config(a, W);  // the auto choices: resolved by plan_and_check_run
  resolve_shard_ranks(cfg, node_block_ranks(info.node_of_rank));
  resolve_rank_threads(cfg, info.local_world);
  FILE* const json_out = a.json ? data_stdout() : nullptr;  // before NCCL starts printing to stdout
  comm->set_peer_timeout(cfg.run.collective_timeout_s);

  const ResolvedBatch batch = run_batch(cfg, W);
  const model::Qwen3Config qc = bench_model_config(cfg);
  const MemoryPlan plan = plan_and_check_run(cfg, qc, info.rank, W, info.local_world, batch.micro, batch.accum);
  const data::PairDataset pairs = synthetic_pairs(a.pairs * a.steps, a.seq, qc.vocab_size, uint64_t(cfg.run.seed));
  const data::BatchConfig batch_cfg = batch_config(cfg.data);
  data::PairSampler sampler(sampler_config(cfg, batch), pairs.num_pairs(), data::pair_tokens(pairs, batch_cfg), info.rank,
                            W);

  TrainStack stack;
  {
    const Communicator::SlowPhase slow(*comm, cfg.run.slow_phase_timeout_s);  // set-up: one rank may lag
    stack = assemble_train_stack(cfg, *comm, qc, engine_config(cfg, W, batch.accum, a.steps));
    init_stack_weights(stack, cfg, qc, info.local_world);
  }
  const int64_t params = int64_t(stack.engine->partition().total_numel);
  const int64_t non_embedding = non_embedding_params(stack.model->groups());
  const bool cuda = cfg.backend == Backend::Cuda;
  const double peak_tflops = a.peak_tflops > 0 ? a.peak_tflops : cuda ? kH100PeakTflops : 0;
  const std::string ckpt = checkpointing_text(cfg.model, qc.num_layers);
  const std::string head = fmt::format(
      "bench: {}, backend {}, world {}, stage {}, {} layers hidden {} ({} parameters, {} non-embedding), seq {}, "
      "{} pairs ({} sequences) per step, micro {}, checkpointing {}",
      cfg.source, stack.backend_description, W, cfg.zero.stage, qc.num_layers, qc.hidden_size, params, non_embedding,
      a.seq, a.pairs, 2 * a.pairs, cfg.batch.micro_tokens > 0 ? fmt::format("{} tokens{}", cfg.batch.micro_tokens,
                                                                            cfg.batch.micro_tokens_auto ? " (auto)" : "")
                                                               : fmt::format("{} pairs", batch.micro),
      ckpt);
  if (r0 && !a.json) {
    printf("%s\n", head.c_str());
    fflush(stdout);
  }

  std::vector<double> step_s, step_tokens, step_loss;
  // Where the measured steps' time went (this rank's clock: rank 0's in the output), by category as the
  // trainer's summary counts it: the profile a speed cell comes with.
  StepTimes measured_times;
  double measured_wall = 0;
  try {
    for (int64_t s = 0; s < a.steps; ++s) {
      stack.clock->discard();
      const double t0 = MPI_Wtime();
      data::StepPlan sp = sampler.next_step();
      PairStats local;
      const StepResult res = train_step(
          *stack.engine, *stack.model, *stack.access, sp.micro.size(),
          [&](size_t i) -> std::optional<data::PairBatch> {
            const data::MicroBatchPlan& mb = sp.micro[i];
            if (mb.pair_ids.empty()) return std::nullopt;
            return data::make_batch(pairs, mb.pair_ids, mb.pair_mask, batch_cfg);
          },
          sp.global_real_pairs, local);
      stack.ops->synchronize();  // the step's device work is done (a GPU queues it)
      const StepTimes times = stack.clock->take();
      if (s >= a.warmup) {
        measured_times += times;
        measured_wall += MPI_Wtime() - t0;
      }
      double sums[3] = {local.tokens, local.loss_sum, local.pairs};
      comm->all_reduce_scalars(sums, 3, ReduceOp::Sum);
      double dt = MPI_Wtime() - t0;
      comm->all_reduce_scalars(&dt, 1, ReduceOp::Max);  // the slowest rank's
      step_s.push_back(dt);
      step_tokens.push_back(sums[0]);
      step_loss.push_back(sums[2] > 0 ? sums[1] / sums[2] : 0);
      if (r0 && !a.json) {
        printf("step %lld/%lld | %.4f s | %.0f tokens | %.0f tokens/s | loss %.4f%s%s\n", (long long)(s + 1),
               (long long)a.steps, dt, sums[0], sums[0] / dt, step_loss.back(), s < a.warmup ? " | warm-up" : "",
               res.applied ? "" : " | SKIPPED (non-finite gradient)");
        fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    throw Error(fmt::format("{}: out of memory at seq {}, {} pairs per step ({}). Memory plan: {}", cfg.source, a.seq,
                            a.pairs, e.what(), plan.describe()));
  }

  const std::vector<double> measured(step_s.begin() + a.warmup, step_s.end());
  const double med = median(measured);
  const double tokens = step_tokens.back();  // every step holds the same pairs x 2 x seq real tokens
  const double flops = training_model_flops(qc, non_embedding, a.seq, tokens);
  const double mfu = peak_tflops > 0 ? model_flops_utilisation(flops, med, peak_tflops, W) : 0;
  // Peak memory of the largest rank: tracked bytes and the device's in use (CUDA), or VmHWM (CPU).
  double mem[2] = {double(cuda ? stack.tracked_peak_bytes() : peak_resident_bytes()), double(device_bytes_in_use(cfg))};
  comm->all_reduce_scalars(mem, 2, ReduceOp::Max);
  if (!r0) return 0;
  if (a.json) {
    nlohmann::json j = {{"config", cfg.source},
                        {"backend", cuda ? "cuda" : "cpu"},
                        {"world", W},
                        {"stage", cfg.zero.stage},
                        {"activation_checkpointing", ckpt},
                        {"seq", a.seq},
                        {"pairs_per_step", a.pairs},
                        {"micro_tokens", cfg.batch.micro_tokens},  // the budget (auto's choice); 0: pairs
                        {"parameters", params},
                        {"non_embedding_parameters", non_embedding},
                        {"steps", a.steps},
                        {"warmup", a.warmup},
                        {"step_s", step_s},
                        {"step_tokens", step_tokens},
                        {"step_loss", step_loss},
                        {"tokens_per_step", int64_t(tokens)},
                        {"median_step_s", med},
                        {"tokens_per_s", tokens / med},
                        {"model_flops_per_step", flops},
                        {"peak_tflops", peak_tflops > 0 ? nlohmann::json(peak_tflops) : nlohmann::json()},
                        {"mfu", peak_tflops > 0 ? nlohmann::json(mfu) : nlohmann::json()},
                        {"peak_memory_bytes", int64_t(mem[0])},
                        {"peak_memory_kind", cuda ? "tracked (engine buffers + activations)" : "VmHWM"},
                        {"measured_time_s", time_breakdown_json(measured_times, measured_wall)},
                        {"measured_op_s", op_times_json(measured_times)},
                        {"measured_host_time_s", host_time_json(measured_times)}};
    if (cuda) j["device_in_use_bytes"] = int64_t(mem[1]);
    fprintf(json_out, "%s\n", j.dump().c_str());
    fflush(json_out);
  } else {
    const std::string mfu_text =
        peak_tflops > 0 ? fmt::format("MFU {:.1f}% of {:g} TFLOP/s per rank", 100 * mfu, peak_tflops)
                        : std::string("MFU: give --peak-tflops");
    const std::string mem_text =
        cuda ? fmt::format("peak {:.2f} GiB tracked, {:.2f} GiB in use on the device", gib(mem[0]), gib(mem[1]))
             : fmt::format("peak RSS {:.1f} MiB", mem[0] / (1 << 20));
    printf("summary | median step %.4f s (steps %lld-%lld) | %.0f tokens per step | %.0f tokens/s | %s | %s\n", med,
           (long long)(a.warmup + 1), (long long)a.steps, tokens, tokens / med, mfu_text.c_str(), mem_text.c_str());
    printf("time in steps %lld-%lld (rank 0): %s\n", (long long)(a.warmup + 1), (long long)a.steps,
           time_shares_line(measured_times, measured_wall).c_str());
    if (measured_times.device_timed)
      printf("host issuing in steps %lld-%lld (rank 0, inside the scopes): %s\n", (long long)(a.warmup + 1),
             (long long)a.steps, host_shares_line(measured_times, measured_wall).c_str());
    printf("ops in steps %lld-%lld (rank 0, ms a step): %s\n", (long long)(a.warmup + 1), (long long)a.steps,
           op_times_line(measured_times, double(a.steps - a.warmup)).c_str());
  }
  fflush(stdout);
  return 0;
}

}  // namespace zero::pmtrain
