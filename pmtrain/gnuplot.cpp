#include "pmtrain/gnuplot.h"

#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "pmtrain/subprocess.h"

namespace zero::pmtrain {
namespace fs = std::filesystem;

std::string gnuplot_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

void render_line_plot(const LinePlot& plot, const std::string& png_path) {
  const fs::path png(png_path);
  const fs::path stem = png.parent_path() / png.stem();
  const std::string data = stem.string() + ".dat", script = stem.string() + ".gp";
  const std::string points = stem.string() + ".points.txt", log = stem.string() + ".gnuplot.log";

  // One block per series, two blank lines apart, so `index k` picks series k. Numbers in their shortest
  // exact form: what is plotted is the value itself, not a rounding of it.
  std::ofstream d(data);
  std::string plot_cmd;
  int index = 0;
  for (const PlotSeries& s : plot.series) {
    if (s.points.empty()) continue;
    d << "# " << s.title << "\n";
    for (const auto& [x, y] : s.points) d << fmt::format("{} {}\n", x, y);
    d << "\n\n";
    plot_cmd += fmt::format("{}{} index {} using 1:2 with linespoints lw 2 pt 7 title {}", index ? ", " : "plot ",
                            index ? "''" : gnuplot_quote(data), index, gnuplot_quote(s.title));
    ++index;
  }
  d.close();
  ZERO_REQUIRE(d, InputError, "{}: cannot write the plot data", data);
  ZERO_REQUIRE(index > 0, InputError, "{}: nothing to plot (no series has points)", png_path);

  std::ofstream g(script);
  g << "set encoding utf8\n";
  g << "set title " << gnuplot_quote(plot.title) << " noenhanced\n";
  g << "set xlabel " << gnuplot_quote(plot.xlabel) << " noenhanced\n";
  g << "set ylabel " << gnuplot_quote(plot.ylabel) << " noenhanced\n";
  g << "set grid\nset key outside right top noenhanced\n";
  if (!plot.xtics.empty()) {
    std::string tics;
    for (double x : plot.xtics) tics += fmt::format("{}{}", tics.empty() ? "" : ", ", x);
    g << "set xtics (" << tics << ")\n";
    g << fmt::format("set xrange [{}:{}]\n", plot.xtics.front() - 0.25, plot.xtics.back() + 0.25);
  }
  if (plot.y_from_zero) g << "set yrange [0:*]\n";
  // The table first, with 12 significant digits (gnuplot's default is 6), then the picture of the very
  // same plot command.
  g << "set format x '%.12g'\nset format y '%.12g'\n";
  g << "set table " << gnuplot_quote(points) << "\n" << plot_cmd << "\nunset table\n";
  g << "set format x '%g'\nset format y '%g'\n";
  g << "set terminal pngcairo size 1000,600 noenhanced\n";
  g << "set output " << gnuplot_quote(png_path) << "\nreplot\nunset output\n";
  g.close();
  ZERO_REQUIRE(g, InputError, "{}: cannot write the gnuplot script", script);

  ProcessResult r;
  try {
    r = run_process({"gnuplot", script}, log, 60);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} (plots need gnuplot: apt-get install gnuplot-nox, or launch/setup.sh)", e.what()));
  }
  ZERO_REQUIRE(r.exit_code == 0, InputError, "gnuplot failed on {} (exit {}): {} (log: {})", script, r.exit_code,
               telling_line(log, "line"), log);
  ZERO_REQUIRE(fs::exists(png_path), InputError, "gnuplot did not write {} (log: {})", png_path, log);
  fs::remove(log);
}

}  // namespace zero::pmtrain
