// Reading a run's metrics.jsonl back (pmtrain plot, pmtrain sweep): every line a JSON object, or an
// InputError naming the file and line. Records of a step written twice (a run resumed before the records
// were trimmed) keep the last one, so a reader sees each step once.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zero::pmtrain {

// <run_dir>/metrics.jsonl, every record in file order. InputError: no such file (is it a run
// directory?), an empty file, a line that is not a JSON object (file:line and the parser's message).
std::vector<nlohmann::json> read_metrics(const std::string& run_dir);

// The records of one "type" ("train", "eval", ...) that carry a numeric "step", the last one of each
// step, in step order.
std::vector<nlohmann::json> records_by_step(const std::vector<nlohmann::json>& records, const std::string& type);

// The last record of a type (e.g. the "summary"); null when there is none.
nlohmann::json last_record(const std::vector<nlohmann::json>& records, const std::string& type);

}  // namespace zero::pmtrain
