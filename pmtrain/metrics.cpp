#include "pmtrain/metrics.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>

#include "core/check.h"

namespace zero::pmtrain {

nlohmann::json PairStats::to_json(bool with_tokens) const {
  nlohmann::json j = {{"loss", loss()},         {"accuracy", accuracy()}, {"chosen_reward", chosen()},
                      {"rejected_reward", rejected()}, {"margin", chosen() - rejected()}, {"pairs", int64_t(pairs)}};
  if (with_tokens) j.update({{"tokens", int64_t(tokens)}, {"answer_tokens", int64_t(answer_tokens)}});
  return j;
}

std::string PairStats::summary() const {
  return fmt::format("loss {:.4f} | acc {:.3f} | chosen {:.4f} | rejected {:.4f} | margin {:.4f} | {} pairs", loss(),
                     accuracy(), chosen(), rejected(), chosen() - rejected(), int64_t(pairs));
}

nlohmann::json SetStats::to_json(bool with_tokens) const {
  nlohmann::json j = all.to_json(with_tokens);
  for (const auto& [name, st] : sets)
    if (st.pairs > 0) j["sets"][name] = st.to_json(with_tokens);
  return j;
}

std::string SetStats::sets_text() const {
  std::string text;
  for (const auto& [name, st] : sets)
    if (st.pairs > 0) text += fmt::format("  set {} | {}\n", name, st.summary());
  return text;
}

void SetStats::add(const SetStats& o) {
  all.add(o.all);
  if (sets.empty()) sets = o.sets;
  else {
    ZERO_CHECK(sets.size() == o.sets.size(), "adding metrics of {} sets to {}", o.sets.size(), sets.size());
    for (size_t i = 0; i < sets.size(); ++i) sets[i].second.add(o.sets[i].second);
  }
}

nlohmann::json EvalStats::record() const {
  nlohmann::json j = to_json();
  j["runtime_s"] = runtime_s;
  j["pairs_per_s"] = pairs_per_s();
  return j;
}

std::string EvalStats::summary() const {
  return fmt::format("{} in {:.1f} s, {:.0f} pairs/s", all.summary(), runtime_s, pairs_per_s());
}

namespace {
// The wall clock of the metrics: each record's "time", and the event file's start.
double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

MetricsLog::MetricsLog(const std::string& path, bool active, int64_t keep_through_step,
                       const std::string& tensorboard_dir, const Config* config)
    : path_(path) {
  if (!active) return;
  std::vector<nlohmann::json> kept;  // for the event file, rebuilt from them
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {  // rewrite through a temp file: a crash leaves the old one
    std::ifstream in(path);
    const std::string tmp = path + ".tmp";
    std::ofstream out(tmp, std::ios::trunc);
    std::string line;
    int64_t at = 0;
    while (keep_through_step >= 0 && std::getline(in, line)) {
      ++at;
      const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) {  // a line cut short by a crash or a full disk: no record, and it would stop `plot`
        fprintf(stderr, "pmtrain: %s:%lld: dropping a line that is not a JSON record (cut short when the run stopped?)\n",
                path.c_str(), (long long)at);
        continue;
      }
      const bool later = j.is_object() && j.contains("step") && j["step"].is_number() &&
                         j["step"].get<int64_t>() > keep_through_step;
      // A run that goes on past its old end (more steps, more early-stop patience) ends again itself.
      const bool old_end = j.is_object() && (j.value("type", "") == "summary" || j.value("final", false));
      if (later || old_end) continue;
      out << line << "\n";
      if (!tensorboard_dir.empty()) kept.push_back(j);
    }
    out.close();
    ZERO_REQUIRE(out, InputError, "{}: cannot rewrite the metrics file", tmp);
    std::filesystem::rename(tmp, path, ec);
    ZERO_REQUIRE(!ec, InputError, "{}: cannot replace the metrics file: {}", path, ec.message());
  }
  file_ = fopen(path.c_str(), "a");
  ZERO_REQUIRE(file_, InputError, "{}: cannot open the metrics file for writing", path);
  if (tensorboard_dir.empty()) return;
  events_ = std::make_unique<EventFile>(tensorboard_dir, unix_seconds_now());
  if (config) {  // TensorBoard's text is Markdown: the YAML as a code block (each line indented 4 spaces)
    std::string block = "    ";
    for (const char c : to_yaml(*config)) block += c == '\n' ? std::string("\n    ") : std::string(1, c);
    while (block.ends_with(' ')) block.pop_back();
    events_warning_.after_write(events_->write_text("config", block), events_->path());
    events_warning_.after_write(events_->write_hparams(config_scalars(*config)), events_->path());
  }
  for (const auto& j : kept) write_event(j);
}

MetricsLog::~MetricsLog() {
  if (file_) fclose(file_);
  if (events_ && !ended_ && std::uncaught_exceptions() > 0)  // an error ends the run: a failed session
    events_->write_session_end(false, unix_seconds_now(), last_step_);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!file_) return;
  nlohmann::json r = record;
  r["time"] = unix_seconds_now();
  const std::string line = r.dump() + "\n";
  errno = 0;
  const bool written = fwrite(line.data(), 1, line.size(), file_) == line.size() && fflush(file_) == 0;
  if (!written) clearerr(file_);
  file_warning_.after_write(written, path_);
  if (!events_) return;
  write_event(r);
  if (r.value("type", "") == "summary") {  // the run's end: a successful session
    ended_ = true;
    events_warning_.after_write(events_->write_session_end(true, r["time"].get<double>(), last_step_), events_->path());
  }
}

void MetricsLog::write_event(const nlohmann::json& record) {
  events_warning_.after_write(events_->write(record), events_->path());
  if (record.contains("step") && record["step"].is_number_integer())
    last_step_ = std::max(last_step_, record["step"].get<int64_t>());
}

// Training goes on (its checkpoints are what a full disk must not cost, and they say so themselves), but
// never silently: said once when records start to be lost, and again if they land again.
void MetricsLog::LossWarning::after_write(bool written, const std::string& path) {
  if (!written && !failing)
    fprintf(stderr, "pmtrain: warning: writing %s failed (%s): metrics records are being lost; training goes on\n",
            path.c_str(), errno ? std::strerror(errno) : "short write");
  if (written && failing) fprintf(stderr, "pmtrain: %s is written again (records were lost before this one)\n", path.c_str());
  failing = !written;
}

namespace {
// What no category covers: host work between scopes, idle, and (CUDA) the stream's gaps.
double other_seconds(const StepTimes& t, double wall_s) { return wall_s - t.total(); }
double percent_of(double s, double wall_s) { return wall_s > 0 ? 100.0 * s / wall_s : 0.0; }
// {"gemm": s, ...} and "gemm 41.0% | ..." of one time per category (the device's or the host's).
nlohmann::json categories_json(const std::array<double, kTimeCategories>& seconds) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t c = 0; c < kTimeCategories; ++c) j[time_category_name(TimeCategory(c))] = seconds[c];
  return j;
}
std::string shares_line(const std::array<double, kTimeCategories>& seconds, double wall_s) {
  std::string line;
  for (size_t c = 0; c < kTimeCategories; ++c)
    line += fmt::format("{}{} {:.1f}%", line.empty() ? "" : " | ", time_category_name(TimeCategory(c)),
                        percent_of(seconds[c], wall_s));
  return line;
}
}  // namespace

nlohmann::json time_breakdown_json(const StepTimes& t, double wall_s) {
  nlohmann::json j = categories_json(t.seconds);
  j["other"] = other_seconds(t, wall_s);
  return j;
}

nlohmann::json host_time_json(const StepTimes& t) {
  return t.device_timed ? categories_json(t.host_seconds) : nlohmann::json();
}

std::string time_shares_line(const StepTimes& t, double wall_s) {
  return shares_line(t.seconds, wall_s) + fmt::format(" | other {:.1f}%", percent_of(other_seconds(t, wall_s), wall_s));
}

std::string host_shares_line(const StepTimes& t, double wall_s) {
  return t.device_timed ? shares_line(t.host_seconds, wall_s) : std::string();
}

nlohmann::json op_times_json(const StepTimes& t) {
  nlohmann::json j = nlohmann::json::object();
  for (const OpTime& op : t.ops) {
    nlohmann::json& o = j[op.name];
    o = {{"s", op.seconds}, {"calls", op.calls}, {"category", time_category_name(op.category)}};
    if (t.device_timed) o["host_s"] = op.host_seconds, o["launches"] = op.launches;
    if (op.work.bytes > 0) o["bytes"] = op.work.bytes;
    if (op.work.flops > 0) o["flops"] = op.work.flops;
  }
  return j;
}

std::string op_rate(const OpTime& op) {
  if (op.seconds <= 0) return "";
  const double flops = op.work.flops / op.seconds;  // a GPU's in TFLOP/s, a CPU core's in GFLOP/s
  if (op.work.flops > 0) return flops >= 1e12 ? fmt::format("{:.1f} TFLOP/s", flops / 1e12) : fmt::format("{:.1f} GFLOP/s", flops / 1e9);
  if (op.work.bytes > 0) return fmt::format("{:.0f} GB/s", op.work.bytes / op.seconds / 1e9);
  return "";
}

std::string op_times_line(const StepTimes& t, double steps) {
  std::vector<OpTime> ops = t.ops;
  std::stable_sort(ops.begin(), ops.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  std::string line;
  for (const OpTime& op : ops) {
    const double per_step = 1e3 / std::max(steps, 1.0);
    std::string notes = op_rate(op);
    if (t.device_timed)
      notes += fmt::format("{}host {:.2f}, {:g} launches", notes.empty() ? "" : "; ", op.host_seconds * per_step,
                           double(op.launches) / std::max(steps, 1.0));
    line += fmt::format("{}{} {:.2f}{}", line.empty() ? "" : " | ", op.name, op.seconds * per_step,
                        notes.empty() ? "" : " (" + notes + ")");
  }
  return line;
}

std::string format_bytes(double b) {
  if (b >= double(1ull << 30)) return fmt::format("{:.1f} GiB", b / double(1ull << 30));
  return fmt::format("{:.0f} MiB", b / double(1ull << 20));
}

std::string format_duration(double s) {
  if (s < 0 || s != s) return "?";
  const long t = long(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

}  // namespace zero::pmtrain
