// Qwen3 architecture hyperparameters, their validation, and parsing from an HF config.json.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace zero::model {

struct Qwen3Config {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;    // HF num_hidden_layers
  int64_t num_heads = 0;     // HF num_attention_heads
  int64_t num_kv_heads = 0;  // HF num_key_value_heads; kv head j serves q heads j*r .. j*r+r-1
  int64_t head_dim = 0;      // may differ from hidden_size / num_heads (Qwen3 uses 128 everywhere)
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  bool tie_word_embeddings = true;  // informational: the reward model has no lm_head
  int64_t pad_token_id = -1;        // -1 = none (null in config.json)
  std::vector<int64_t> eos_token_ids;
  double initializer_range = 0.02;  // std of HF's normal init for linear and embedding weights

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // Throws ConfigError (naming `what`) unless sizes are positive, heads divide, head_dim is even.
  void validate(std::string_view what = "qwen3 config") const;
};

// A tiny deterministic CPU config for tests and `examples`: vocab 512, hidden 64, intermediate 160,
// 2 layers, 4 heads, 2 kv heads, head_dim 16, theta 10000.
Qwen3Config tiny_qwen3_config();

// Parses the JSON text of an HF config.json (`source` names it in errors). Accepts both RoPE spellings:
// "rope_theta" (transformers 4.x) and "rope_parameters": {"rope_theta"} (5.x); rope_type must be
// "default" when given. eos_token_id may be null, an int or a list. Throws InputError.
Qwen3Config parse_hf_config(std::string_view json_text, std::string_view source);
// Reads and parses DIR/config.json or a config file path.
Qwen3Config load_hf_config(const std::filesystem::path& path);

}  // namespace zero::model
