#include "pmtrain/cli.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "pmtrain/config.h"
#include "pmtrain/version.h"

namespace zero::pmtrain {

namespace {
bool is_yaml(const std::string& s) {
  return s.ends_with(".yaml") || s.ends_with(".yml");
}

// A whole number >= min. CLI11's own ranges print their bounds as 300-digit doubles.
CLI::Validator at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || v < min)
          return "'" + s + "' is not a whole number >= " + std::to_string(min);
        return "";
      },
      "");
}

// A number > 0 (CLI::PositiveNumber names its bound as a 300-digit double).
CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || !(v > 0))
          return "'" + s + "' is not a number > 0";
        return "";
      },
      "");
}

// CONFIG and --set, shared by every command that reads a config.
void add_config(CLI::App* c, ConfigArgs& a, bool required = true) {
  auto* path = c->add_option("CONFIG", a.path, "the run's YAML config, e.g. configs/tiny_cpu.yaml");
  if (required) path->required();
  c->add_option("--set", a.overrides,
                "override a config key, validated like the file; repeatable, e.g. --set zero.stage=3 --set batch.global=64")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
}

// Which weights eval and score use (weights.h); at most one of the three.
void add_weights(CLI::App* c, WeightsArgs& w, const char* default_text) {
  auto* ck = c->add_option("--checkpoint", w.checkpoint,
                           std::string("a checkpoint: a step_N directory or a run directory (its newest), e.g. "
                                       "--checkpoint runs/tiny_cpu/checkpoints/step_60; default: ") + default_text)
                 ->type_name("PATH");
  auto* model = c->add_option("--model", w.model, "an exported HF model directory, e.g. --model exports/rm")
                    ->type_name("HF_DIR");
  auto* init = c->add_flag("--init", w.init,
                           "the config's initial weights (random init or model.hf_dir), untrained, e.g. a baseline");
  ck->excludes(model)->excludes(init);
  model->excludes(init);
}

// sweep and plot: many runs at once, and their pictures (sweep_command.h, plot_command.h).
void add_sweep_and_plot(CLI::App& app, SweepArgs& sw, PlotArgs& pl) {
  CLI::App* sweep = app.add_subcommand("sweep", "train a grid of ranks x stages (x micro or micro_tokens), one job each; CSV, markdown "
                                                "table and PNG plots of tokens/s and peak memory (no MPI itself)");
  sweep->add_option("CONFIG", sw.config, "the YAML config every cell trains, e.g. configs/tiny_cpu.yaml")->required();
  sweep->add_option("--set", sw.overrides, "override a config key in every cell, e.g. --set data.max_train_pairs=96")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  sweep->add_option("--ranks", sw.ranks, "rank counts, e.g. --ranks 1,2,4 (the default)")
      ->delimiter(',')
      ->check(at_least(1))
      ->type_name("N,N,...");
  sweep->add_option("--stages", sw.stages, "ZeRO stages, e.g. --stages 0,3; default 0,1,2,3")
      ->delimiter(',')
      ->check(CLI::Range(0, 3))
      ->type_name("S,S,...");
  sweep->add_option("--micro", sw.micro, "batch.micro values, e.g. --micro 1,2; default: the config's")
      ->delimiter(',')
      ->check(at_least(1))
      ->type_name("N,N,...");
  sweep->add_option("--micro-tokens", sw.micro_tokens,
                    "batch.micro_tokens values (micro-batches filled to a token budget), instead of --micro, e.g. "
                    "--micro-tokens 1024,2048")
      ->delimiter(',')
      ->check(at_least(1))
      ->type_name("T,T,...");
  sweep->add_option("--steps", sw.steps, "optimizer steps per cell, e.g. --steps 5; default: the config's")
      ->check(at_least(1))
      ->type_name("N");
  sweep->add_option("--out", sw.out, "the sweep's directory (a run directory per cell inside), e.g. --out "
                                     "bench/results/sweep_tiny; default runs/sweep")
      ->type_name("DIR");
  sweep->add_option("--launcher", sw.launcher, "how each cell starts: mpirun or srun; default srun inside a Slurm "
                                               "allocation (SLURM_JOB_ID set), else mpirun")
      ->check(CLI::IsMember({"mpirun", "srun"}))
      ->type_name("mpirun|srun");
  sweep->add_option("--mpirun", sw.mpirun, "the mpirun to use, e.g. --mpirun /usr/bin/mpirun; default: mpirun from PATH")
      ->type_name("PATH");
  sweep->add_option("--cell-timeout", sw.cell_timeout_s, "stop a cell after this many seconds (it is then a failed "
                                                         "row), e.g. --cell-timeout 600; default: no limit")
      ->check(positive_number())
      ->type_name("SECONDS");
  sweep->footer("Example (source launch/mpi_env.sh first on an oversubscribed machine):\n"
                "  pmtrain sweep configs/tiny_cpu.yaml --ranks 1,2,4 --stages 0,1,2,3 --steps 5 --out bench/results/sweep_tiny");

  CLI::App* plot = app.add_subcommand("plot", "PNG curves of loss, accuracy, margin, grad norm, lr and tokens/s from "
                                              "metrics.jsonl, several runs overlaid (no MPI)");
  plot->add_option("RUN_DIR", pl.run_dirs, "run directories (each with a metrics.jsonl), e.g. runs/a runs/b")->required();
  plot->add_option("--out", pl.out, "where the PNGs go, e.g. --out plots/ab; default plots")->type_name("DIR");
  plot->footer("Example:\n  pmtrain plot runs/tiny_cpu runs/tiny_cpu_lr1e-3 --out plots/lr");

  app.add_subcommand("config-doc", "print the config reference (docs/CONFIG.md): every key with its type, default, "
                                   "accepted values and meaning")
      ->footer("Example:\n  pmtrain config-doc > docs/CONFIG.md");
}
}  // namespace

std::optional<int> parse_command_line(int argc, char** argv, bool speak, CommandLine& out) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && is_yaml(args[0])) args.insert(args.begin(), "train");  // `pmtrain CONFIG.yaml`

  CLI::App app{"pmtrain: trains pairwise reward models (Qwen3) with ZeRO sharded data parallelism.", "pmtrain"};
  app.set_version_flag("--version", version_text(), "print the git revision and whether the CUDA backend is built");
  app.require_subcommand(1);
  app.fallthrough();  // --version after a command word too
  app.footer(
      "Examples:\n"
      "  mpirun -np 4 pmtrain train configs/tiny_cpu.yaml\n"
      "  srun -n 8 --mpi=pmix pmtrain configs/qwen3_4b_bs128.yaml\n"
      "  pmtrain COMMAND --help");

  CLI::App* train = app.add_subcommand("train", "train under mpirun/srun (or alone); `pmtrain CONFIG.yaml` is short for it");
  add_config(train, out.train.config);
  train->add_option("--resume", out.train.resume,
                    "continue from 'auto' (the newest complete checkpoint of run.dir, if any) or a checkpoint "
                    "directory, on any world size and stage, e.g. --resume auto")
      ->type_name("auto|PATH");
  train->add_flag("--dry-run", out.train.dry_run,
                  "print the resolved config and the memory plan per rank, then exit without training; world size "
                  "from the launcher, else batch.world, else 1");
  train->footer("Example:\n  mpirun -np 4 pmtrain train configs/tiny_cpu.yaml --set zero.stage=3 --resume auto");

  CLI::App* eval = app.add_subcommand("eval", "loss, accuracy, rewards and margin of a model on the test split");
  add_config(eval, out.eval.config);
  add_weights(eval, out.eval.weights, "the newest complete checkpoint of the config's run.dir");
  eval->add_option("--data", out.eval.data,
                   "evaluate these pair files (.jsonl or .jsonl.gz) instead of the config's test split "
                   "(data.test_files and data.test_sets), e.g. --data helpful_test.jsonl.gz; NAME=FILE makes FILE "
                   "(part of) a named set, reported on its own as data.test_sets are: --data helpful=h.jsonl.gz "
                   "--data harmless=a.jsonl.gz")
      ->type_name("FILE");
  eval->footer("Examples:\n  mpirun -np 2 pmtrain eval configs/tiny_cpu.yaml\n  pmtrain eval configs/tiny_cpu.yaml --init\n"
               "  pmtrain eval configs/tiny_cpu.yaml --data pairs.jsonl.gz\n"
               "  pmtrain eval configs/tiny_cpu.yaml --data helpful=helpful.jsonl.gz --data harmless=harmless.jsonl.gz");

  // ---- bench (pmtrain/bench_command.h) ----
  BenchArgs& be = out.bench;
  CLI::App* bench = app.add_subcommand(
      "bench", "tokens/s, MFU and peak memory of the training step on synthetic pairs (no data read; under mpirun too)");
  bench->add_option("CONFIG", be.config_path, "the run's YAML config (model, backend, stage), e.g. configs/qwen3_0_6b_bs128.yaml")
      ->required();
  bench->add_option("--set", be.overrides, "override a config key, e.g. --set model.activation_checkpointing=false")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  bench->add_option("--seq", be.seq, "tokens in every sequence, e.g. --seq 2048 (the default)")->check(at_least(1))->type_name("N");
  bench->add_option("--pairs-per-step", be.pairs, "pairs per optimizer step over all ranks (2 sequences each), e.g. "
                                                  "--pairs-per-step 2 (the default)")
      ->check(at_least(1))
      ->type_name("N");
  bench->add_option("--steps", be.steps, "steps to run, warm-up included, e.g. --steps 10 (the default)")
      ->check(at_least(1))
      ->type_name("N");
  bench->add_option("--warmup", be.warmup, "first steps left out of the median, e.g. --warmup 2 (the default)")
      ->check(at_least(0))
      ->type_name("N");
  bench->add_option("--peak-tflops", be.peak_tflops, "peak FLOP/s per rank for MFU, e.g. --peak-tflops 989; default "
                                                     "989 (H100 SXM dense bf16) on cuda, no MFU on the CPU")
      ->check(positive_number())
      ->type_name("TFLOPS");
  bench->add_flag("--json", be.json, "print one JSON object (every step's time and tokens, the summary) instead of lines");
  bench->footer("Examples:\n  pmtrain bench configs/qwen3_0_6b_bs128.yaml --set zero.stage=0 --json\n"
                "  mpirun -np 2 pmtrain bench configs/tiny_cpu.yaml --seq 256 --steps 6");

  // ---- plan and calibrate (pmtrain/plan_command.h, pmtrain/calibrate.h) ----
  PlanArgs& pl = out.plan;
  CLI::App* plan = app.add_subcommand(
      "plan", "memory per GPU/rank, fit, micro-batch, traffic and step/epoch time per stage, world and GPU size (no MPI)");
  plan->add_option("CONFIG", pl.config_path, "the run's YAML config, e.g. configs/qwen3_4b_bs128.yaml")->required();
  plan->add_option("--set", pl.overrides, "override a config key, e.g. --set model.activation_checkpointing=false")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  plan->add_option("--world", pl.worlds, "rank (GPU) counts to plan for, e.g. --world 1,2,4,8,16; default batch.world, else 1")
      ->type_name("N[,N...]");
  plan->add_option("--ranks-per-node", pl.ranks_per_node,
                   "ranks (GPUs) per node, e.g. --ranks-per-node 8; default: GPUs min(world, 8), CPU all on this node")
      ->check(at_least(1))
      ->type_name("N");
  plan->add_option("--gpu-mem", pl.gpu_mem,
                   "plan for GPUs of these sizes, e.g. --gpu-mem 24GiB,40GiB,80GiB (binary units; the cuda backend's "
                   "default); without it a CPU config plans this node's host memory")
      ->type_name("SIZE[,SIZE...]");
  plan->add_option("--global-batch", pl.global_batch, "pairs per optimizer step, e.g. --global-batch 128; default batch.global")
      ->check(at_least(1))
      ->type_name("N");
  plan->add_option("--micro", pl.micro, "plan this micro-batch (pairs per rank) instead of the largest that fits, e.g. --micro 2")
      ->check(at_least(1))
      ->type_name("N");
  plan->add_option("--dataset-pairs", pl.dataset_pairs,
                   "pairs per epoch for the epoch time, priced at max_len, without reading the data, e.g. --dataset-pairs "
                   "160000; default: the training split (data.train_files, data.train_sets) read as training reads it "
                   "(tokenized through data.cache_dir), the epoch (under data.train_weights) priced at its own lengths")
      ->check(at_least(1))
      ->type_name("N");
  plan->add_option("--profile", pl.profile,
                   "compute speeds from `pmtrain calibrate --out FILE`; default: a built-in profile marked assumed")
      ->type_name("FILE");
  plan->add_option("--intra-link", pl.intra_link,
                   "link between GPUs of a node: pcie4, nvlink-h100 (default: nvlink-h100 with 80 GiB GPUs, else pcie4)")
      ->type_name("LINK");
  plan->add_option("--inter-link", pl.inter_link, "link between nodes: ib100, ib200 (default), ib400")->type_name("LINK");
  plan->add_flag("--json", pl.json, "print JSON (every cell with its peak per rank in bytes) instead of the table");
  plan->add_option("--sbatch", pl.sbatch,
                   "write a Slurm batch script for the recommended plan (one --world, one --gpu-mem), e.g. --sbatch job.sbatch")
      ->type_name("FILE");
  plan->add_option("--launcher", pl.launcher, "how the sbatch script starts ranks: srun (default) or mpirun")
      ->check(CLI::IsMember({"srun", "mpirun"}))
      ->type_name("srun|mpirun");
  plan->footer(
      "Exit code 3 when the run fits nowhere in the grid (the message says what would).\n"
      "Examples:\n  pmtrain plan configs/qwen3_4b_bs128.yaml --world 8,16 --gpu-mem 24GiB,80GiB\n"
      "  pmtrain plan configs/tiny_cpu.yaml --world 1,2,4 --profile cpu.json --json");

  CLI::App* cal = app.add_subcommand("calibrate", "measure GEMM, element-wise, AdamW and collective speed of a config's backend "
                                   "here for `plan --profile` (a few seconds; under mpirun -np W the collectives at W "
                                   "ranks, added to --out)");
  cal->add_option("CONFIG", out.calibrate.config_path, "the config whose backend, zero.param_dtype and threads to measure, "
                                                       "e.g. configs/qwen3_4b_bs128.yaml; default: the CPU backend in fp32")
      ->type_name("CONFIG");
  cal->add_option("--set", out.calibrate.overrides, "override a config key, e.g. --set backend=cuda --set zero.param_dtype=bf16")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cal->add_option("--out", out.calibrate.out, "where to save the profile (JSON), e.g. --out cpu_profile.json")->type_name("FILE");
  cal->add_option("--threads", out.calibrate.threads, "math threads per rank to measure with, e.g. --threads 1; default: "
                                                      "the config's `threads`")
      ->check(at_least(1))
      ->type_name("N");
  cal->add_flag("--quick", out.calibrate.quick, "a rough profile in a tenth of the time (each rate timed over fewer "
                                                "calls): for trying a plan, not for choosing a cluster's shape");
  cal->footer("Examples:\n  pmtrain calibrate --out cpu_profile.json && pmtrain plan configs/tiny_cpu.yaml --profile cpu_profile.json\n"
              "  pmtrain calibrate configs/qwen3_4b_bs128.yaml --out h100.json   (on a GPU node: cuBLASLt bf16, NCCL)\n"
              "  mpirun -np 8 pmtrain calibrate configs/qwen3_4b_bs128.yaml --out h100.json   (adds NCCL at 8 ranks)");
  // ---- end plan and calibrate ----

  ExportRequest& ex = out.export_request;
  CLI::App* exp = app.add_subcommand("export", "a checkpoint -> an HF model directory (transformers loads it; no MPI)");
  exp->add_option("RUN_DIR", ex.run_dir, "a run directory (its newest checkpoint) or a step_N directory, e.g. runs/tiny_cpu")
      ->required();
  exp->add_option_function<int64_t>("--step", [&ex](const int64_t& s) { ex.step = s; },
                                    "the checkpoint step to export, e.g. --step 60; default: the newest")
      ->check(at_least(0))
      ->type_name("N");
  exp->add_option("--to", ex.out_dir, "the HF directory to write, e.g. --to exports/rm")->required()->type_name("OUT_DIR");
  exp->add_option_function<std::string>("--dtype", [&ex](const std::string& s) { ex.dtype = export_dtype_named("--dtype", s); },
                                        "weights stored as bf16 (default) or fp32, e.g. --dtype fp32")
      ->check(CLI::IsMember(export_dtype_spellings()))
      ->type_name("bf16|fp32");
  exp->add_option("--tokenizer", ex.tokenizer,
                  "tokenizer.json to ship (its tokenizer_config.json too), e.g. --tokenizer data/assets/qwen3/tokenizer.json; "
                  "default: the run's")
      ->type_name("FILE");
  exp->add_flag_function("--no-verify", [&ex](int64_t) { ex.verify_checksums = false; },
                "skip the xxhash64 check of the checkpoint files (faster on a trusted copy)");
  exp->add_option("--progress-s", ex.progress_s,
                  "print a progress line (the checksums, then the weights: done, rate, ETA) every this many seconds; "
                  "0 = never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->type_name("S");
  exp->footer("Example:\n  pmtrain export runs/tiny_cpu --to exports/rm --dtype fp32");

  ScoreArgs& sc = out.score;
  CLI::App* score = app.add_subcommand("score", "chosen/rejected reward of every pair of a JSONL file (no MPI)");
  add_config(score, sc.config, /*required=*/false);
  add_weights(score, sc.weights, "the newest complete checkpoint of CONFIG's run.dir");
  score->add_option("--data", sc.data, "pairs {\"chosen\", \"rejected\"} as .jsonl or .jsonl.gz, e.g. --data pairs.jsonl.gz")
      ->required()
      ->type_name("FILE");
  score->add_option("--out", sc.out,
                    "where the rows go, e.g. --out scores.jsonl (default stdout): {\"line\": N, \"chosen\": r, "
                    "\"rejected\": r} per input line, or {\"line\": N, \"skipped\": why}")
      ->type_name("FILE");
  score->add_option("--tokenizer", sc.tokenizer,
                    "tokenizer.json, e.g. --tokenizer data/assets/qwen3/tokenizer.json; default: the model's, else "
                    "data.tokenizer")
      ->type_name("FILE");
  score->footer(
      "Data settings come from data.* (CONFIG or --set), e.g. --set data.format=chat --set data.max_len=2048 --set "
      "data.bad_lines=fail.\n"
      "Examples:\n  pmtrain score configs/tiny_cpu.yaml --data pairs.jsonl --out scores.jsonl\n"
      "  pmtrain score --model exports/rm --data pairs.jsonl.gz");

  RenderArgs& rn = out.render;
  CLI::App* render = app.add_subcommand(
      "render", "the text of every pair of a JSONL file as training reads it: prompt field, chat template (no MPI)");
  add_config(render, rn.config, /*required=*/false);
  render->add_option("--data", rn.data, "pairs as .jsonl or .jsonl.gz, e.g. --data pairs.jsonl.gz")->required()->type_name("FILE");
  render->add_option("--out", rn.out,
                     "where the rows go, e.g. --out texts.jsonl (default stdout): {\"line\": N, \"chosen\": text, "
                     "\"rejected\": text} per input line, or {\"line\": N, \"skipped\": why}")
      ->type_name("FILE");
  render->footer(
      "Data settings come from data.* (CONFIG or --set): data.prompt_field, data.chosen_field, data.rejected_field, "
      "data.format, data.bad_lines.\n"
      "Examples:\n  pmtrain render configs/tiny_cpu.yaml --data data/assets/hh-rlhf/harmless-base/test.jsonl.gz | head -3\n"
      "  pmtrain render --set data.prompt_field=prompt --data ultrafeedback.jsonl --out texts.jsonl");

  CLI::App* tok = app.add_subcommand("tokenize", "{\"text\"} JSONL lines on stdin -> {\"ids\"} lines on stdout (no MPI)");
  tok->add_option("--tokenizer", out.tokenizer, "tokenizer.json, e.g. --tokenizer data/assets/qwen3/tokenizer.json")
      ->required()
      ->type_name("FILE");
  tok->footer("Example:\n  pmtrain tokenize --tokenizer data/assets/qwen3/tokenizer.json < texts.jsonl");

  add_sweep_and_plot(app, out.sweep, out.plot);

  const std::vector<std::string> given = args;
  try {
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version
      if (speak) app.exit(e);
      return 0;
    }
    std::string name = "pmtrain", why = e.what();
    for (const CLI::App* s : app.get_subcommands()) name += " " + s->get_name();
    if (app.get_subcommands().empty() && !given.empty() && !given[0].starts_with("-")) {
      std::string names;
      for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
        names += (names.empty() ? "" : ", ") + s->get_name();
      why = "unknown command '" + given[0] + "' (" + names + ", or a CONFIG.yaml to train)";
    }
    if (speak) fprintf(stderr, "%s: error: %s (see '%s --help')\n", name.c_str(), why.c_str(), name.c_str());
    return 2;
  }
  out.command = app.get_subcommands().at(0)->get_name();
  return std::nullopt;
}

bool is_data_output_command(const CommandLine& cl) {
  return cl.command == "score" || cl.command == "render" || cl.command == "tokenize" || cl.command == "config-doc";
}

}  // namespace zero::pmtrain
