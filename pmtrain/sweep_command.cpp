#include "pmtrain/sweep_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/ranges.h>

#include "core/check.h"
#include "pmtrain/config.h"
#include "pmtrain/gnuplot.h"
#include "pmtrain/metrics_reader.h"
#include "pmtrain/paths.h"
#include "pmtrain/subprocess.h"

namespace zero::pmtrain {
namespace fs = std::filesystem;

namespace {
struct Cell {
  int ranks = 0, stage = 0, micro = 0;  // micro 0: the config's
  int micro_tokens = 0;                 // > 0: batch.micro_tokens (--micro-tokens)
  std::string dir;
  bool ok = false;
  std::string reason;  // why it failed
  double tokens_per_s = 0, peak_rss_mib = 0, step_s = 0, final_loss = 0, seconds = 0;
  double peak_device_mib = 0;  // backend cuda: the largest rank's tracked device peak (0 on the CPU)
  std::string checkpointing;   // the run's activation checkpointing (under auto, what it chose for this cell)
  int64_t steps = 0;
};

std::vector<int> sorted_unique(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The cell's job: the launcher, this very binary, `train CONFIG`, the user's --set, then the sweep's own
// (last, so they win): its run dir, its stage, ranks and micro, and nothing but training in the timing
// (no eval, no checkpoint).
std::vector<std::string> cell_command(const SweepArgs& a, const std::string& launcher, const Cell& c) {
  std::vector<std::string> cmd;
  if (launcher == "srun")
    cmd = {"srun", "-n", std::to_string(c.ranks)};  // --mpi from the site default or SLURM_MPI_TYPE
  else
    cmd = {a.mpirun, "-np", std::to_string(c.ranks)};
  cmd.push_back(fs::read_symlink("/proc/self/exe").string());
  cmd.insert(cmd.end(), {"train", a.config});
  std::vector<std::string> sets = a.overrides;
  sets.insert(sets.end(), {"run.dir=" + c.dir, "zero.stage=" + std::to_string(c.stage), "run.resume=''",
                           "run.start_over=true", "run.save_final=false", "run.save_every=0", "run.eval_every=0",
                           "run.eval_at_start=false", "data.test_files=[]", "data.test_sets={}", "run.keep_best=none",
                           "run.keep_best_set=''", "run.early_stop=0", "batch.world=0"});
  if (c.micro > 0)  // a pair count sets the micro-batches: no token budget (the Qwen3 configs have one)
    sets.insert(sets.end(), {"batch.micro=" + std::to_string(c.micro), "batch.micro_tokens=0"});
  if (c.micro_tokens > 0)  // a token budget sets the micro-batches: no pair count, the accumulation derived
    sets.insert(sets.end(), {"batch.micro=0", "batch.accum=0", "batch.micro_tokens=" + std::to_string(c.micro_tokens)});
  if (a.steps > 0) sets.push_back("run.steps=" + std::to_string(a.steps));
  for (const std::string& s : sets) cmd.insert(cmd.end(), {"--set", s});
  return cmd;
}

// Fills the cell's figures from its metrics.jsonl (the summary record and the train records).
void read_cell(Cell& c) {
  const auto records = read_metrics(c.dir);
  const nlohmann::json summary = last_record(records, "summary");
  ZERO_REQUIRE(!summary.is_null(), InputError, "{}/metrics.jsonl: no summary record (the run did not finish)", c.dir);
  const auto train = records_by_step(records, "train");
  ZERO_REQUIRE(!train.empty(), InputError, "{}/metrics.jsonl: no train records", c.dir);
  c.tokens_per_s = summary.at("tokens_per_s").get<double>();
  c.peak_rss_mib = summary.at("peak_rss_bytes_max_rank").get<double>() / (1 << 20);
  if (summary.contains("peak_device_bytes_max_rank"))
    c.peak_device_mib = summary.at("peak_device_bytes_max_rank").get<double>() / (1 << 20);
  c.checkpointing = summary.value("activation_checkpointing", "");
  if (const int64_t budget = summary.value("micro_tokens", int64_t(0)); budget > 0) c.micro_tokens = int(budget);  // auto's choice
  c.seconds = summary.at("seconds").get<double>();
  c.steps = summary.at("steps").get<int64_t>();
  std::vector<double> step_s;
  for (const auto& r : train) step_s.push_back(r.at("step_s").get<double>());
  c.step_s = median(step_s);
  c.final_loss = train.back().at("loss").get<double>();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

// The memory that limits the cells: the GPU's when they ran on one (backend cuda), else the host's.
struct MemoryFigure {
  double Cell::*field;
  const char* column;  // the table's
  const char* axis;    // the plot's
};
MemoryFigure memory_figure(const std::vector<Cell>& cells) {
  const bool device = std::any_of(cells.begin(), cells.end(), [](const Cell& c) { return c.peak_device_mib > 0; });
  if (device) return {&Cell::peak_device_mib, "peak device memory (MiB)", "peak device memory of the largest rank (MiB)"};
  return {&Cell::peak_rss_mib, "peak RSS (MiB)", "peak RSS of the largest rank (MiB)"};
}

std::string micro_text(const Cell& c, int64_t config_micro) {
  if (c.micro_tokens > 0) return fmt::format("{} tokens", c.micro_tokens);
  const int64_t m = c.micro > 0 ? c.micro : config_micro;
  return m > 0 ? std::to_string(m) : "derived";
}

void write_csv(const std::string& path, const std::vector<Cell>& cells, int64_t config_micro) {
  std::ofstream out(path);
  out << "ranks,stage,micro,micro_tokens,status,tokens_per_s,peak_rss_mib,peak_device_mib,step_s_median,final_loss,steps,seconds,"
         "activation_checkpointing,run_dir,reason\n";
  for (const Cell& c : cells) {
    out << c.ranks << "," << c.stage << "," << (c.micro_tokens > 0 ? "" : micro_text(c, config_micro)) << ","
        << (c.micro_tokens > 0 ? std::to_string(c.micro_tokens) : "") << "," << (c.ok ? "ok" : "failed") << ",";
    if (c.ok)
      out << fmt::format("{},{},{},{},{},{},{},{}", c.tokens_per_s, c.peak_rss_mib,
                         c.peak_device_mib > 0 ? fmt::format("{}", c.peak_device_mib) : "", c.step_s, c.final_loss,
                         c.steps, c.seconds, csv_field(c.checkpointing));
    else
      out << ",,,,,,,";
    out << "," << csv_field(c.dir) << "," << csv_field(c.reason) << "\n";
  }
  ZERO_REQUIRE(out, InputError, "{}: cannot write", path);
}

void write_markdown(const std::string& path, const SweepArgs& a, const std::vector<Cell>& cells, int64_t config_micro) {
  std::ofstream out(path);
  out << "Sweep of `" << a.config << "`";
  for (const std::string& s : a.overrides) out << " `--set " << s << "`";
  if (a.steps > 0) out << ", " << a.steps << " steps per cell";
  const MemoryFigure mem = memory_figure(cells);
  out << ". tokens/s: all ranks together over the whole run; "
      << (mem.field == &Cell::peak_rss_mib
              ? "peak RSS: the largest rank's high-water mark (VmHWM).\n\n"
              : "peak device memory: the largest rank's engine buffers and activations at their peak (tracked).\n\n");
  out << "| ranks | stage | micro | status | tokens/s | " << mem.column
      << " | step time (s, median) | final loss | checkpointing |\n";
  out << "|---:|---:|---:|---|---:|---:|---:|---:|---|\n";
  for (const Cell& c : cells) {
    out << fmt::format("| {} | {} | {} | ", c.ranks, c.stage, micro_text(c, config_micro));
    if (c.ok) {
      out << fmt::format("ok | {:.0f} | {:.1f} | {:.3f} | {:.4f} | {} |\n", c.tokens_per_s, c.*mem.field, c.step_s,
                         c.final_loss, c.checkpointing);
    } else {
      std::string why = c.reason;
      for (size_t p = 0; (p = why.find('|', p)) != std::string::npos; p += 2) why.replace(p, 1, "\\|");
      out << "failed: " << why << " | | | | | |\n";
    }
  }
  ZERO_REQUIRE(out, InputError, "{}: cannot write", path);
}

// x = ranks, one line per stage (and micro, when several were swept); failed cells have no point.
LinePlot figure_plot(const std::vector<Cell>& cells, const SweepArgs& a, const std::vector<int>& ranks, bool several_micro,
                     const char* title, const char* ylabel, double Cell::*figure) {
  LinePlot p;
  p.title = fmt::format("{}: {}", fs::path(a.config).filename().string(), title);
  p.xlabel = "ranks";
  p.ylabel = ylabel;
  p.y_from_zero = true;
  for (int r : ranks) p.xtics.push_back(r);
  std::map<std::pair<int, int>, PlotSeries> lines;  // (stage, micro or micro_tokens) -> its line
  for (const Cell& c : cells) {
    PlotSeries& s = lines[{c.stage, c.micro_tokens > 0 ? c.micro_tokens : c.micro}];
    s.title = !several_micro          ? fmt::format("stage {}", c.stage)
              : c.micro_tokens > 0 ? fmt::format("stage {}, {} tokens", c.stage, c.micro_tokens)
                                   : fmt::format("stage {}, micro {}", c.stage, c.micro);
    if (c.ok) s.points.emplace_back(c.ranks, c.*figure);
  }
  for (auto& [key, s] : lines) p.series.push_back(std::move(s));
  return p;
}
}  // namespace

int run_sweep(const SweepArgs& a) {
  // The config and overrides are checked once here, so a typo stops the sweep before any job starts.
  const Config cfg = load_config(existing_path(a.config, "config file"), a.overrides);
  const std::vector<int> ranks = sorted_unique(a.ranks), stages = sorted_unique(a.stages);
  ZERO_REQUIRE(a.micro.empty() || a.micro_tokens.empty(), ConfigError,
               "--micro and --micro-tokens: sweep one of them (pairs per micro-batch, or a token budget)");
  std::vector<int> micro = sorted_unique(a.micro_tokens.empty() ? a.micro : a.micro_tokens);
  const bool by_tokens = !a.micro_tokens.empty();
  if (micro.empty()) micro = {0};
  for (int s : stages) ZERO_REQUIRE(s >= 0 && s <= 3, ConfigError, "--stages: {} is not a ZeRO stage (0, 1, 2 or 3)", s);
  for (int r : ranks) ZERO_REQUIRE(r >= 1, ConfigError, "--ranks: {} is not a rank count (>= 1)", r);
  std::string launcher = a.launcher;
  if (launcher.empty()) launcher = std::getenv("SLURM_JOB_ID") ? "srun" : "mpirun";
  ZERO_REQUIRE(launcher == "mpirun" || launcher == "srun", ConfigError, "--launcher: '{}' (mpirun or srun)", launcher);

  make_dir(a.out, "--out");
  std::vector<Cell> cells;
  for (int m : micro)
    for (int s : stages)
      for (int r : ranks) {
        Cell c;
        c.ranks = r, c.stage = s;
        (by_tokens ? c.micro_tokens : c.micro) = m;
        c.dir = (fs::path(a.out) / (m == 0      ? fmt::format("r{}_s{}", r, s)
                                    : by_tokens ? fmt::format("r{}_s{}_t{}", r, s, m)
                                                : fmt::format("r{}_s{}_m{}", r, s, m)))
                    .string();
        // The config's budget, if any, in the tables (auto's: each run's choice, read from its summary).
        if (m == 0 && !cfg.batch.micro_tokens_auto) c.micro_tokens = int(cfg.batch.micro_tokens);
        cells.push_back(c);
      }
  printf("sweep: %zu cells (ranks %s x stages %s%s) of %s with %s, into %s\n", cells.size(),
         fmt::format("{}", fmt::join(ranks, ",")).c_str(), fmt::format("{}", fmt::join(stages, ",")).c_str(),
         micro.size() > 1 || micro[0] > 0
             ? fmt::format(" x {} {}", by_tokens ? "micro_tokens" : "micro", fmt::join(micro, ",")).c_str()
             : "",
         a.config.c_str(), launcher.c_str(), a.out.c_str());
  fflush(stdout);

  int failed = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    Cell& c = cells[i];
    fs::create_directories(c.dir);
    fs::remove(RunFiles(c.dir).metrics());  // a cell run again starts its metrics afresh
    const std::string log = (fs::path(c.dir) / "out.txt").string();
    const ProcessResult pr = run_process(cell_command(a, launcher, c), log, a.cell_timeout_s);
    if (pr.timed_out) {
      c.reason = fmt::format("timed out after {} s (see {})", a.cell_timeout_s, log);
    } else if (pr.exit_code != 0) {
      c.reason = fmt::format("exit {}: {} (see {})", pr.exit_code, telling_line(log, "error:"), log);
    } else {
      try {
        read_cell(c);
        c.ok = true;
      } catch (const Error& e) {
        c.reason = e.what();
      }
    }
    failed += !c.ok;
    if (c.ok)
      printf("sweep: [%zu/%zu] ranks %d stage %d: %.0f tokens/s, peak RSS %.1f MiB%s, step %.3f s, loss %.4f\n", i + 1,
             cells.size(), c.ranks, c.stage, c.tokens_per_s, c.peak_rss_mib,
             c.peak_device_mib > 0 ? fmt::format(", peak device memory {:.1f} MiB", c.peak_device_mib).c_str() : "",
             c.step_s, c.final_loss);
    else
      printf("sweep: [%zu/%zu] ranks %d stage %d: FAILED: %s\n", i + 1, cells.size(), c.ranks, c.stage, c.reason.c_str());
    fflush(stdout);
  }

  const fs::path out(a.out);
  write_csv((out / "sweep.csv").string(), cells, cfg.batch.micro);
  write_markdown((out / "sweep.md").string(), a, cells, cfg.batch.micro);
  printf("sweep: %s, %s\n", (out / "sweep.csv").c_str(), (out / "sweep.md").c_str());
  if (failed < int(cells.size())) {
    const bool several_micro = micro.size() > 1;
    render_line_plot(figure_plot(cells, a, ranks, several_micro, "training throughput", "tokens/s (all ranks)",
                                 &Cell::tokens_per_s),
                     (out / "tokens_per_s.png").string());
    const MemoryFigure mem = memory_figure(cells);
    render_line_plot(figure_plot(cells, a, ranks, several_micro, "peak memory per rank", mem.axis, mem.field),
                     (out / "peak_memory.png").string());
    printf("sweep: %s, %s\n", (out / "tokens_per_s.png").c_str(), (out / "peak_memory.png").c_str());
  } else {
    printf("sweep: every cell failed; no plots\n");
  }
  printf("sweep: %zu cells, %d failed\n", cells.size(), failed);
  return failed ? 1 : 0;
}

}  // namespace zero::pmtrain
