#include "pmtrain/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <charconv>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <type_traits>

#include "core/check.h"

namespace zero::pmtrain {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The values a numeric key accepts: lo..hi, each end included or not. Printed as the user would read
// it in an error ("> 0", "in [0, 1)").
struct Range {
  double lo = -kInf, hi = kInf;
  bool lo_included = true, hi_included = true;

  bool contains(double v) const {  // false for NaN
    return (lo_included ? v >= lo : v > lo) && (hi_included ? v <= hi : v < hi);
  }
  std::string describe() const {
    if (std::isinf(hi)) return fmt::format("{} {}", lo_included ? ">=" : ">", lo);
    return fmt::format("in {}{}, {}{}", lo_included ? '[' : '(', lo, hi, hi_included ? ']' : ')');
  }
};
constexpr Range kPositive{0, kInf, false};
constexpr Range kNonNegative{0, kInf};
constexpr Range kAtLeastOne{1, kInf};
constexpr Range kUnit{0, 1};                   // [0, 1]
constexpr Range kBelowOne{0, 1, true, false};  // [0, 1): Adam betas

// One config key: how to read it from YAML, how to print it back, the values it accepts (numeric keys
// with a range), and where its value last came from (for the error when it is out of range).
struct Field {
  std::string key;
  std::function<void(const YAML::Node&)> set;
  std::function<YAML::Node()> get;
  std::optional<Range> range;
  std::function<double()> number;  // the value as a double, for the range check
  std::string origin;              // "file:line" or "--set"; empty while it holds its default
};

template <class T>
Field field(std::string key, T& ref) {
  Field f;
  f.key = std::move(key);
  f.set = [&ref](const YAML::Node& n) { ref = n.as<T>(); };
  f.get = [&ref] { return YAML::Node(ref); };
  return f;
}

template <class T>
  requires std::is_arithmetic_v<T>
Field field(std::string key, T& ref, Range range) {
  Field f = field(std::move(key), ref);
  f.range = range;
  f.number = [&ref] { return double(ref); };
  return f;
}

// A double prints as the shortest text that reads back to it (3.0e-3 -> 0.003), not yaml-cpp's 17
// digits (0.0030000000000000001).
template <>
Field field(std::string key, double& ref) {
  return {std::move(key), [&ref](const YAML::Node& n) { ref = n.as<double>(); }, [&ref] {
            char buf[32];
            return YAML::Node(std::string(buf, std::to_chars(buf, buf + sizeof(buf), ref).ptr));
          }};
}

std::vector<Field> schema(Config& c) {
  auto& r = c.run;
  auto& m = c.model;
  auto& d = c.data;
  auto& b = c.batch;
  auto& z = c.zero;
  auto& o = c.optim;
  // 0 means "derived" or "off" for most counts (see config.h), so they are only kept from going negative.
  return {
      field("backend", c.backend), field("threads", c.threads, kAtLeastOne),
      field("run.dir", r.dir), field("run.seed", r.seed), field("run.steps", r.steps, kNonNegative),
      field("run.epochs", r.epochs, kAtLeastOne),
      field("run.log_every", r.log_every, kNonNegative), field("run.eval_every", r.eval_every, kNonNegative),
      field("run.eval_pairs", r.eval_pairs, kNonNegative), field("run.save_every", r.save_every, kNonNegative),
      field("run.save_final", r.save_final), field("run.keep_last", r.keep_last, kAtLeastOne),
      field("run.keep_every", r.keep_every, kNonNegative), field("run.async_save", r.async_save),
      field("run.resume", r.resume), field("run.start_over", r.start_over), field("run.stop_at", r.stop_at, kNonNegative),
      field("run.collective_timeout_s", r.collective_timeout_s, kNonNegative),
      field("run.slow_phase_timeout_s", r.slow_phase_timeout_s, kNonNegative),
      field("model.hf_dir", m.hf_dir), field("model.preset", m.preset),
      field("model.vocab_size", m.vocab_size, kNonNegative),
      field("model.hidden_size", m.hidden_size, kNonNegative),
      field("model.intermediate_size", m.intermediate_size, kNonNegative),
      field("model.num_layers", m.num_layers, kNonNegative), field("model.num_heads", m.num_heads, kNonNegative),
      field("model.num_kv_heads", m.num_kv_heads, kNonNegative), field("model.head_dim", m.head_dim, kNonNegative),
      field("model.rope_theta", m.rope_theta, kNonNegative), field("model.rms_norm_eps", m.rms_norm_eps, kPositive),
      field("model.init_seed", m.init_seed), field("model.activation_checkpointing", m.activation_checkpointing),
      field("model.attention", m.attention), field("model.decay_norms", m.decay_norms),
      field("model.decay_embedding", m.decay_embedding),
      field("data.tokenizer", d.tokenizer), field("data.train_files", d.train_files),
      field("data.test_files", d.test_files), field("data.max_train_pairs", d.max_train_pairs, kNonNegative),
      field("data.chosen_field", d.chosen_field),
      field("data.rejected_field", d.rejected_field), field("data.format", d.format),
      field("data.max_len", d.max_len, kAtLeastOne), field("data.too_long", d.too_long),
      field("data.bad_lines", d.bad_lines),
      field("data.end_token", d.end_token), field("data.layout", d.layout), field("data.pad_to", d.pad_to, kAtLeastOne),
      field("data.pack_row_len", d.pack_row_len, kNonNegative), field("data.bucket_by_length", d.bucket_by_length),
      field("data.shuffle", d.shuffle), field("data.remainder", d.remainder), field("data.cache_dir", d.cache_dir),
      field("batch.global", b.global, kNonNegative), field("batch.micro", b.micro, kNonNegative),
      field("batch.accum", b.accum, kNonNegative), field("batch.world", b.world, kNonNegative),
      field("batch.micro_tokens", b.micro_tokens, kNonNegative),
      field("zero.stage", z.stage, Range{0, 3}), field("zero.bucket_elements", z.bucket_elements, kAtLeastOne),
      field("zero.prefetch_depth", z.prefetch_depth, kNonNegative), field("zero.param_dtype", z.param_dtype),
      field("zero.accum_dtype", z.accum_dtype), field("zero.reduce_dtype", z.reduce_dtype),
      field("optim.lr", o.lr, kPositive), field("optim.beta1", o.beta1, kBelowOne),
      field("optim.beta2", o.beta2, kBelowOne), field("optim.eps", o.eps, kPositive),
      field("optim.weight_decay", o.weight_decay, kNonNegative), field("optim.schedule", o.schedule),
      field("optim.warmup_ratio", o.warmup_ratio, kUnit), field("optim.warmup_steps", o.warmup_steps, kNonNegative),
      field("optim.min_lr_ratio", o.min_lr_ratio, kUnit), field("optim.clip_norm", o.clip_norm, kNonNegative),
  };
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string did_you_mean(const std::string& key, const std::vector<Field>& fields) {
  const std::string leaf = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const Field& f : fields) {
    size_t dist = edit_distance(key, f.key);
    const std::string fleaf = f.key.substr(f.key.rfind('.') == std::string::npos ? 0 : f.key.rfind('.') + 1);
    dist = std::min(dist, edit_distance(leaf, fleaf) + 1);  // right name, wrong section
    if (dist < best_d) best_d = dist, best = f.key;
    // A misnamed section (optimizer: for optim:) matches a section name, often as a prefix either way.
    const std::string section = f.key.substr(0, f.key.find('.'));
    if (key.find('.') == std::string::npos && section != f.key) {
      const bool prefix = key.starts_with(section) || section.starts_with(key);
      const size_t sd = prefix ? 0 : edit_distance(key, section);
      if (sd < best_d) best_d = sd, best = section;
    }
  }
  return best_d <= std::max<size_t>(3, key.size() / 3) ? fmt::format(" (did you mean '{}'?)", best) : "";
}

std::string where(const std::string& source, const YAML::Node& n) {
  const YAML::Mark mk = n.Mark();
  return mk.line >= 0 ? fmt::format("{}:{}", source, mk.line + 1) : source;
}

void assign(Field& f, const YAML::Node& value, const std::string& at) {
  try {
    f.set(value);
    f.origin = at;
  } catch (const YAML::Exception&) {
    const YAML::Node expect = f.get();
    const char* kind = expect.IsSequence() ? "a list" : "a value like '" ;
    throw ConfigError(fmt::format("{}: key '{}': cannot use {} here (expected {}{})", at, f.key,
                                  value.IsScalar() ? "'" + value.Scalar() + "'" : std::string("this value"), kind,
                                  expect.IsSequence() ? "" : YAML::Dump(expect) + "'"));
  }
}

// yaml-cpp keeps every entry of a mapping, duplicates included, and lookups see only one of them: a key
// given twice is almost always an edit that did not take effect, so it is an error naming both lines.
void reject_duplicate_keys(const YAML::Node& node, const std::string& prefix, const std::string& source) {
  if (node.IsSequence())
    for (const YAML::Node& item : node) reject_duplicate_keys(item, prefix, source);
  if (!node.IsMap()) return;
  std::vector<YAML::Node> seen;
  for (const auto& kv : node) {
    const std::string name = kv.first.as<std::string>();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    for (const YAML::Node& earlier : seen)
      ZERO_REQUIRE(earlier.as<std::string>() != name, ConfigError, "{}: key '{}' is given twice (lines {} and {})",
                   where(source, kv.first), key, earlier.Mark().line + 1, kv.first.Mark().line + 1);
    seen.push_back(kv.first);
    reject_duplicate_keys(kv.second, key, source);
  }
}

// After the file and the overrides: each numeric key's final value against its range.
void check_ranges(const std::vector<Field>& fields, const std::string& source) {
  for (const Field& f : fields) {
    if (!f.range || f.range->contains(f.number())) continue;
    throw ConfigError(fmt::format("{}: key '{}' is {}; it must be {}", f.origin.empty() ? source : f.origin, f.key,
                                  YAML::Dump(f.get()), f.range->describe()));
  }
}

void walk(const YAML::Node& node, const std::string& prefix, std::vector<Field>& fields, const std::string& source) {
  for (const auto& kv : node) {
    const std::string name = kv.first.as<std::string>();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    auto it = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == key; });
    if (it != fields.end()) {
      assign(*it, kv.second, where(source, kv.first));
      continue;
    }
    const bool is_section = std::any_of(fields.begin(), fields.end(),
                                        [&](const Field& f) { return f.key.rfind(key + ".", 0) == 0; });
    if (is_section && kv.second.IsMap()) {
      walk(kv.second, key, fields, source);
      continue;
    }
    if (is_section && kv.second.IsNull()) continue;  // an empty section
    throw ConfigError(fmt::format("{}: unknown key '{}'{}", where(source, kv.first), key, did_you_mean(key, fields)));
  }
}

}  // namespace

Config parse_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides) {
  Config c;
  c.source = source;
  std::vector<Field> fields = schema(c);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}:{}: malformed YAML: {}", source, e.mark.line + 1, e.msg));
  }
  if (!root.IsNull()) {
    ZERO_REQUIRE(root.IsMap(), ConfigError, "{}: the top level must be a mapping of sections (run:, model:, ...)", source);
    reject_duplicate_keys(root, "", source);
    walk(root, "", fields, source);
  }
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    ZERO_REQUIRE(eq != std::string::npos && eq > 0, ConfigError, "--set '{}': expected key=value", o);
    const std::string key = o.substr(0, eq);
    auto it = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == key; });
    ZERO_REQUIRE(it != fields.end(), ConfigError, "--set: unknown key '{}'{}", key, did_you_mean(key, fields));
    YAML::Node value;
    try {
      value = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::ParserException& e) {
      throw ConfigError(fmt::format("--set {}: malformed value: {}", key, e.msg));
    }
    assign(*it, value, "--set");
  }
  check_ranges(fields, source);
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  ZERO_REQUIRE(in.good(), ConfigError, "{}: cannot open config file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, overrides);
}

std::string to_yaml(const Config& const_c) {
  Config c = const_c;
  YAML::Node root;
  for (const Field& f : schema(c)) {
    const size_t dot = f.key.find('.');
    if (dot == std::string::npos)
      root[f.key] = f.get();
    else
      root[f.key.substr(0, dot)][f.key.substr(dot + 1)] = f.get();
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> known_keys() {
  Config c;
  std::vector<std::string> keys;
  for (const Field& f : schema(c)) keys.push_back(f.key);
  return keys;
}

}  // namespace zero::pmtrain
