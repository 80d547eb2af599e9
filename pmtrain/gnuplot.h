// Line plots as PNG through gnuplot (Debian's gnuplot-nox; launch/setup.sh installs it): the points go
// to a data file, a script plots them, and the same plot command also runs once under `set table`, so
// gnuplot itself writes the points it plotted (points_path). Tests compare those with the CSV or JSONL
// they came from, parsed on their own, so a plot is checked without trusting this code.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace zero::pmtrain {

struct PlotSeries {
  std::string title;                             // the legend entry
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
};

struct LinePlot {
  std::string title, xlabel, ylabel;
  std::vector<PlotSeries> series;  // empty series are left out (gnuplot cannot plot nothing)
  std::vector<double> xtics;       // tick marks at exactly these x (e.g. the rank counts); empty = automatic
  bool y_from_zero = false;        // y axis starts at 0 (throughput, memory), else fits the data
};

// Writes png_path, plus beside it <stem>.dat (the data), <stem>.gp (the script) and <stem>.points.txt
// (gnuplot's table of the plotted points: per curve "# Curve title: ..." then "x y type" rows). Throws
// InputError when no series has points, when gnuplot is missing or fails (its message included).
void render_line_plot(const LinePlot& plot, const std::string& png_path);

// A quoted gnuplot string literal for any text ('' doubles a quote; nothing else is special).
std::string gnuplot_quote(const std::string& s);

}  // namespace zero::pmtrain
