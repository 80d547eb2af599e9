// pmtrain's command line: one CLI11 parser for every command (train, eval, bench, plan, calibrate, export,
// score, render, tokenize, sweep, plot, config-doc). Each option is defined once, in cli.cpp, with its help text and an example; `pmtrain
// CONFIG.yaml ...` means `pmtrain train CONFIG.yaml ...`. Parsing needs no MPI, so help, --version and
// usage errors never start a job.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "pmtrain/bench_command.h"
#include "pmtrain/calibrate.h"
#include "pmtrain/export_command.h"
#include "pmtrain/plot_command.h"
#include "pmtrain/sweep_command.h"
#include "pmtrain/plan_command.h"
#include "pmtrain/weights.h"

namespace zero::pmtrain {

struct ConfigArgs {
  std::string path;                    // CONFIG.yaml ("" where optional and not given)
  std::vector<std::string> overrides;  // --set key=value, in order
};

struct TrainArgs {
  ConfigArgs config;
  std::string resume;  // --resume auto|PATH ("" = the config's run.resume)
  bool dry_run = false;
};

struct EvalArgs {
  ConfigArgs config;
  WeightsArgs weights;
  std::vector<std::string> data;  // evaluate these files instead of the config's test split (empty: the config's)
};

struct ScoreArgs {
  ConfigArgs config;  // optional: data.* settings and the default weights (its run.dir)
  WeightsArgs weights;
  std::string data, out, tokenizer;
};

struct RenderArgs {
  ConfigArgs config;  // optional: data.* settings
  std::string data, out;
};

struct CommandLine {
  std::string command;  // train | eval | bench | plan | calibrate | export | score | render | tokenize | sweep | plot | config-doc
  TrainArgs train;
  EvalArgs eval;
  BenchArgs bench;
  PlanArgs plan;
  CalibrateArgs calibrate;
  RenderArgs render;
  ExportRequest export_request;
  ScoreArgs score;
  std::string tokenizer;  // tokenize --tokenizer
  SweepArgs sweep;
  PlotArgs plot;
};

// Parses argv into `out`. Returns the exit code when parsing ends the program: 0 after --help or
// --version, 2 after a usage error (one line on stderr naming the option). Only a process with
// `speak` set prints (rank 0 under a launcher), so a launched job says it once.
std::optional<int> parse_command_line(int argc, char** argv, bool speak, CommandLine& out);

// Whether the command's stdout is data (score's and render's rows, tokenize's ids, config-doc's document)
// rather than a log of lines to read as they come.
bool is_data_output_command(const CommandLine& cl);

}  // namespace zero::pmtrain
