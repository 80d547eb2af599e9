#include "pmtrain/metrics.h"

#include "core/check.h"

namespace zero::pmtrain {

nlohmann::json PairStats::to_json() const {
  return {{"loss", loss()},         {"accuracy", accuracy()}, {"chosen_reward", chosen()},
          {"rejected_reward", rejected()}, {"margin", chosen() - rejected()}, {"pairs", int64_t(pairs)}};
}

MetricsLog::MetricsLog(const std::string& path, bool active) {
  if (!active) return;
  file_ = fopen(path.c_str(), "a");
  ZERO_REQUIRE(file_, InputError, "{}: cannot open the metrics file for writing", path);
}

MetricsLog::~MetricsLog() {
  if (file_) fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!file_) return;
  const std::string line = record.dump() + "\n";
  fwrite(line.data(), 1, line.size(), file_);
  fflush(file_);
}

std::string format_duration(double s) {
  if (s < 0 || s != s) return "?";
  const long t = long(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

}  // namespace zero::pmtrain
