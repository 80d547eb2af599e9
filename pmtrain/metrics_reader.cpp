#include "pmtrain/metrics_reader.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "core/check.h"
#include "pmtrain/paths.h"

namespace zero::pmtrain {
namespace fs = std::filesystem;

std::vector<nlohmann::json> read_metrics(const std::string& run_dir) {
  const std::string path = RunFiles(run_dir).metrics();
  ZERO_REQUIRE(fs::is_directory(run_dir), InputError, "{}: not a directory (expected a pmtrain run directory)", run_dir);
  ZERO_REQUIRE(fs::exists(path), InputError, "{}: no such file: {} is not a pmtrain run directory, or no step has finished yet",
               path, run_dir);
  std::ifstream in(path);
  ZERO_REQUIRE(in.good(), InputError, "{}: cannot read", path);
  std::vector<nlohmann::json> records;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number past a double's range
      throw InputError(fmt::format("{}:{}: malformed line (not JSON: {})", path, n, e.what()));
    }
    ZERO_REQUIRE(j.is_object(), InputError, "{}:{}: malformed line (a JSON {}, expected an object)", path, n, j.type_name());
    records.push_back(std::move(j));
  }
  ZERO_REQUIRE(!records.empty(), InputError, "{}: empty (no step has finished yet?)", path);
  return records;
}

std::vector<nlohmann::json> records_by_step(const std::vector<nlohmann::json>& records, const std::string& type) {
  std::map<int64_t, nlohmann::json> by_step;  // a later record of the same step replaces the earlier
  for (const nlohmann::json& r : records)
    if (r.value("type", "") == type && r.contains("step") && r["step"].is_number_integer())
      by_step[r["step"].get<int64_t>()] = r;
  std::vector<nlohmann::json> out;
  for (auto& [step, r] : by_step) out.push_back(std::move(r));
  return out;
}

nlohmann::json last_record(const std::vector<nlohmann::json>& records, const std::string& type) {
  for (auto it = records.rbegin(); it != records.rend(); ++it)
    if (it->value("type", "") == type) return *it;
  return nullptr;
}

}  // namespace zero::pmtrain
