// Qwen3Config validation and HF config.json parsing.
#include "model/qwen3_config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace zero::model {

void Qwen3Config::validate(std::string_view what) const {
  auto positive = [&](int64_t v, const char* key) {
    ZERO_REQUIRE(v > 0, ConfigError, "{}: {} must be positive, got {}", what, key, v);
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_layers, "num_hidden_layers");
  positive(num_heads, "num_attention_heads");
  positive(num_kv_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  ZERO_REQUIRE(num_heads % num_kv_heads == 0, ConfigError,
               "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", what, num_heads,
               num_kv_heads);
  ZERO_REQUIRE(head_dim % 2 == 0, ConfigError, "{}: head_dim {} must be even for rotate_half RoPE", what, head_dim);
  ZERO_REQUIRE(rms_norm_eps > 0, ConfigError, "{}: rms_norm_eps must be positive, got {}", what, rms_norm_eps);
  ZERO_REQUIRE(rope_theta > 0, ConfigError, "{}: rope_theta must be positive, got {}", what, rope_theta);
  ZERO_REQUIRE(pad_token_id < vocab_size, ConfigError, "{}: pad_token_id {} >= vocab_size {}", what, pad_token_id,
               vocab_size);
}

Qwen3Config tiny_qwen3_config() {
  Qwen3Config c;
  c.vocab_size = 512;
  c.hidden_size = 64;
  c.intermediate_size = 160;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.pad_token_id = 0;
  return c;
}

namespace {

using nlohmann::json;

int64_t get_int(const json& j, const char* key, std::string_view source) {
  ZERO_REQUIRE(j.contains(key), InputError, "{}: missing key \"{}\"", source, key);
  ZERO_REQUIRE(j[key].is_number_integer(), InputError, "{}: \"{}\" must be an integer, got {}", source, key,
               j[key].dump());
  return j[key].get<int64_t>();
}

double get_number(const json& j, const char* key, std::string_view source) {
  ZERO_REQUIRE(j[key].is_number(), InputError, "{}: \"{}\" must be a number, got {}", source, key, j[key].dump());
  return j[key].get<double>();
}

}  // namespace

Qwen3Config parse_hf_config(std::string_view json_text, std::string_view source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  ZERO_REQUIRE(j.is_object(), InputError, "{}: expected a JSON object", source);
  if (j.contains("model_type") && j["model_type"].is_string()) {
    const std::string mt = j["model_type"].get<std::string>();
    ZERO_REQUIRE(mt == "qwen3", InputError, "{}: model_type is \"{}\", only \"qwen3\" is supported", source, mt);
  }
  Qwen3Config c;
  c.vocab_size = get_int(j, "vocab_size", source);
  c.hidden_size = get_int(j, "hidden_size", source);
  c.intermediate_size = get_int(j, "intermediate_size", source);
  c.num_layers = get_int(j, "num_hidden_layers", source);
  c.num_heads = get_int(j, "num_attention_heads", source);
  c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                       ? get_int(j, "num_key_value_heads", source)
                       : c.num_heads;  // HF default: no GQA
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? get_int(j, "head_dim", source)
                                                                   : (c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  if (j.contains("rms_norm_eps")) c.rms_norm_eps = get_number(j, "rms_norm_eps", source);
  if (j.contains("initializer_range")) c.initializer_range = get_number(j, "initializer_range", source);

  // RoPE: transformers 5 writes rope_parameters {rope_type, rope_theta}; 4.x writes rope_theta at top level.
  bool have_theta = false;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const json& rp = j["rope_parameters"];
    if (rp.contains("rope_type") && rp["rope_type"].is_string()) {
      const std::string t = rp["rope_type"].get<std::string>();
      ZERO_REQUIRE(t == "default", InputError, "{}: rope_parameters.rope_type \"{}\" is not supported (only default)",
                   source, t);
    }
    if (rp.contains("rope_theta")) {
      c.rope_theta = get_number(rp, "rope_theta", source);
      have_theta = true;
    }
  }
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const json& rs = j["rope_scaling"];
    const std::string t = rs.value("rope_type", rs.value("type", std::string("default")));
    ZERO_REQUIRE(t == "default", InputError, "{}: rope_scaling type \"{}\" is not supported (only default)", source, t);
  }
  if (!have_theta && j.contains("rope_theta")) {
    c.rope_theta = get_number(j, "rope_theta", source);
    have_theta = true;
  }
  ZERO_REQUIRE(have_theta, InputError, "{}: no rope_theta (neither \"rope_theta\" nor \"rope_parameters\".rope_theta)",
               source);

  if (j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean())
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  if (j.contains("pad_token_id") && !j["pad_token_id"].is_null()) c.pad_token_id = get_int(j, "pad_token_id", source);
  if (j.contains("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_number_integer()) {
      c.eos_token_ids.push_back(e.get<int64_t>());
    } else if (e.is_array()) {
      for (const json& v : e) {
        ZERO_REQUIRE(v.is_number_integer(), InputError, "{}: eos_token_id entries must be integers, got {}", source,
                     v.dump());
        c.eos_token_ids.push_back(v.get<int64_t>());
      }
    } else {
      ZERO_REQUIRE(e.is_null(), InputError, "{}: eos_token_id must be null, an integer or a list, got {}", source,
                   e.dump());
    }
  }
  try {
    c.validate(source);
  } catch (const ConfigError& e) {
    throw InputError(e.what());  // a bad file is an input problem, not a run-configuration one
  }
  return c;
}

Qwen3Config load_hf_config(const std::filesystem::path& path) {
  const std::filesystem::path file = std::filesystem::is_directory(path) ? path / "config.json" : path;
  std::ifstream in(file, std::ios::binary);
  ZERO_REQUIRE(in.good(), InputError, "{}: cannot open the model config (is this an HF model directory?)",
               file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hf_config(ss.str(), file.string());
}

}  // namespace zero::model
