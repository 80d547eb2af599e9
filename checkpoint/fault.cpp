#include "checkpoint/fault.h"

#include <csignal>

#include "comm/launch_env.h"
#include "core/check.h"

namespace zero::checkpoint {

namespace {
int64_t parse_int(const std::string& s, const std::string& entry) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ZERO_REQUIRE(used == s.size() && !s.empty() && v >= 0, ConfigError,
               "ZERO_FAULT entry '{}': '{}' is not a non-negative integer (format: "
               "ckpt_kill_after_bytes=B[@rankR][@stepN])", entry, s);
  return v;
}

// The publish step a ckpt_*_at entry names; ENOSPC only where a file is written.
FaultPoint parse_point(const std::string& s, FaultKind kind, const std::string& entry) {
  if (s == "manifest") return FaultPoint::Manifest;
  if (s == "latest") return FaultPoint::Latest;
  if (s == "renamed" && kind == FaultKind::KillAfterBytes) return FaultPoint::Renamed;
  throw ConfigError(fmt::format("ZERO_FAULT entry '{}': unknown publish point '{}' (ckpt_kill_at: manifest, renamed, "
                                "latest; ckpt_enospc_at: manifest, latest)", entry, s));
}
}  // namespace

FaultPlan FaultPlan::parse(const std::string& spec) {
  FaultPlan plan;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    const std::string entry = spec.substr(start, end - start);
    start = end + 1;
    if (entry.rfind("ckpt_", 0) != 0) continue;  // empty, or another layer's fault
    const size_t eq = entry.find('=');
    ZERO_REQUIRE(eq != std::string::npos, ConfigError, "ZERO_FAULT entry '{}' has no '=' (format: name=BYTES[@rankR][@stepN])",
                 entry);
    const std::string name = entry.substr(0, eq);
    Fault f;
    const bool at_point = name == "ckpt_kill_at" || name == "ckpt_enospc_at";
    if (name == "ckpt_kill_after_bytes" || name == "ckpt_kill_at") f.kind = FaultKind::KillAfterBytes;
    else if (name == "ckpt_enospc_after_bytes" || name == "ckpt_enospc_at") f.kind = FaultKind::EnospcAfterBytes;
    else
      throw ConfigError(fmt::format("ZERO_FAULT: unknown checkpoint fault '{}' (known: ckpt_kill_after_bytes, "
                                    "ckpt_enospc_after_bytes, ckpt_kill_at, ckpt_enospc_at)", name));
    std::string rest = entry.substr(eq + 1);
    size_t at = rest.find('@');
    if (at_point) {
      f.point = parse_point(rest.substr(0, at), f.kind, entry);
    } else {
      f.after_bytes = uint64_t(parse_int(rest.substr(0, at), entry));
    }
    while (at != std::string::npos) {
      const size_t next = rest.find('@', at + 1);
      const std::string q = rest.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
      if (q.rfind("rank", 0) == 0) f.rank = int(parse_int(q.substr(4), entry));
      else if (q.rfind("step", 0) == 0) f.step = parse_int(q.substr(4), entry);
      else throw ConfigError(fmt::format("ZERO_FAULT entry '{}': unknown qualifier '@{}' (use @rankR or @stepN)", entry, q));
      at = next;
    }
    plan.faults.push_back(f);
  }
  return plan;
}

FaultPlan FaultPlan::from_env() {
  const auto s = read_env(EnvVar::FaultInjection);
  return s ? parse(*s) : FaultPlan{};
}

namespace {
bool applies(const Fault& f, int rank, int64_t step) {
  return (f.rank < 0 || f.rank == rank) && (f.step < 0 || f.step == step);
}
}  // namespace

std::vector<Fault> FaultPlan::for_write(int rank, int64_t step) const {
  std::vector<Fault> out;
  for (const Fault& f : faults)
    if (f.point == FaultPoint::Shard && applies(f, rank, step)) out.push_back(f);
  return out;
}

PublishFaults FaultPlan::for_publish(int rank, int64_t step) const {
  PublishFaults out;
  for (const Fault& f : faults) {
    if (!applies(f, rank, step)) continue;
    if (f.point == FaultPoint::Manifest) out.manifest.push_back(f);
    if (f.point == FaultPoint::Renamed) out.kill_after_rename = true;
    if (f.point == FaultPoint::Latest) out.latest.push_back(f);
  }
  return out;
}

std::vector<Fault> midway(std::vector<Fault> faults, uint64_t bytes) {
  for (Fault& f : faults) f.after_bytes = bytes / 2;
  return faults;
}

size_t FaultCounter::before_write(size_t n) {
  size_t allowed = n;
  for (const Fault& f : faults_) {
    if (written_ + n <= f.after_bytes) continue;
    const size_t room = f.after_bytes > written_ ? size_t(f.after_bytes - written_) : 0;
    if (f.kind == FaultKind::KillAfterBytes) {
      if (room == 0) raise(SIGKILL);  // the bytes up to the threshold have been written before
      allowed = std::min(allowed, room);  // write up to the threshold, the next call kills
    } else {
      allowed = std::min(allowed, room);
    }
  }
  return allowed;
}

}  // namespace zero::checkpoint
