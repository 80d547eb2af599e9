#include "pmtrain/plot_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/check.h"
#include "pmtrain/gnuplot.h"
#include "pmtrain/metrics_reader.h"
#include "pmtrain/paths.h"

namespace zero::pmtrain {
namespace fs = std::filesystem;

namespace {
// One PNG per metric: its field in the train (and eval) records of metrics.jsonl.
struct Metric {
  const char* field;
  const char* title;
  bool has_eval;  // eval records carry it too
};
constexpr Metric kMetrics[] = {
    {"loss", "pairwise loss", true},     {"accuracy", "accuracy (chosen > rejected)", true},
    {"margin", "reward margin (chosen - rejected)", true}, {"grad_norm", "gradient norm (before clipping)", false},
    {"lr", "learning rate", false},      {"tokens_per_s", "tokens/s (all ranks)", false},
};

struct Run {
  std::string name;
  std::vector<nlohmann::json> train, eval;
};

// Each run is named by its directory; by its whole path where two runs share a last component.
std::vector<std::string> run_names(const std::vector<std::string>& dirs) {
  std::vector<std::string> names;
  for (const std::string& d : dirs) {
    fs::path p = fs::path(d).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // "runs/a/"
    names.push_back(p.filename().string());
  }
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < names.size(); ++j)
      if (i != j && (names[i] == names[j] || names[i].empty())) names[i] = dirs[i];
  return names;
}

// The value at `where` (a JSON pointer: "/loss", "/sets/NAME/loss") of each record that has a number there.
PlotSeries series(const std::string& title, const std::vector<nlohmann::json>& records, const std::string& where) {
  PlotSeries s{title, {}};
  const nlohmann::json::json_pointer at(where);
  for (const nlohmann::json& r : records)
    if (r.contains(at) && r[at].is_number()) s.points.emplace_back(r["step"].get<double>(), r[at].get<double>());
  return s;
}

// The named sets records report (eval: data.test_sets; train: data.train_sets under a mix), in their order.
std::vector<std::string> set_names(const std::vector<nlohmann::json>& records) {
  std::vector<std::string> names;
  for (const nlohmann::json& r : records)
    if (r.contains("sets") && r["sets"].is_object())
      for (const auto& [name, _] : r["sets"].items())
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  return names;
}
}  // namespace

int run_plot(const PlotArgs& a) {
  ZERO_REQUIRE(!a.run_dirs.empty(), InputError, "plot: give at least one run directory");
  const std::vector<std::string> names = run_names(a.run_dirs);
  std::vector<Run> runs;
  for (size_t i = 0; i < a.run_dirs.size(); ++i) {
    const auto records = read_metrics(a.run_dirs[i]);
    Run r{names[i], records_by_step(records, "train"), records_by_step(records, "eval")};
    ZERO_REQUIRE(!r.train.empty(), InputError, "{}/metrics.jsonl: no train records to plot", a.run_dirs[i]);
    runs.push_back(std::move(r));
  }
  make_dir(a.out, "--out");
  for (const Metric& m : kMetrics) {
    LinePlot p;
    p.title = m.title;
    p.xlabel = "step";
    p.ylabel = m.field;
    const std::string field = std::string("/") + m.field;
    for (const Run& r : runs) {
      p.series.push_back(series(m.has_eval ? r.name + " train" : r.name, r.train, field));
      if (!m.has_eval) continue;
      for (const std::string& set : set_names(r.train))  // one curve per training set of a mix
        p.series.push_back(series(r.name + " train " + set, r.train, "/sets/" + set + field));
      p.series.push_back(series(r.name + " eval", r.eval, field));
      for (const std::string& set : set_names(r.eval))  // one curve per named test set
        p.series.push_back(series(r.name + " eval " + set, r.eval, "/sets/" + set + field));
    }
    const std::string png = (fs::path(a.out) / (std::string(m.field) + ".png")).string();
    render_line_plot(p, png);
    printf("plot: %s\n", png.c_str());
  }
  return 0;
}

}  // namespace zero::pmtrain
