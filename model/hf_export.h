// Export of the reward model as an HF model directory that transformers' AutoModelForSequenceClassification
// loads (Qwen3ForSequenceClassification, num_labels 1): config.json, model.safetensors (HF names and
// shapes from qwen3_rm_groups, F32 or BF16 rounded to nearest even, __metadata__ {"format": "pt"}; no
// lm_head) and any extra files (tokenizer.json, tokenizer_config.json).
//
// Streaming: one tensor in memory at a time (the safetensors header is written first, then each tensor
// in qwen3_rm_groups order, each filled by the caller's TensorReader).
//
// Atomic: everything is written and fsynced into OUT_DIR.tmp, then renamed to OUT_DIR. A crash leaves
// OUT_DIR untouched (and a stale OUT_DIR.tmp that the next export removes).
// Overwrite policy: OUT_DIR may be absent, an empty directory, or a previous export (it holds
// zero_export.json, which every export writes); a previous export is replaced as a whole (atomically
// exchanged where the filesystem supports renameat2(RENAME_EXCHANGE), else moved aside, replaced and
// removed). Anything else (a non-empty directory without zero_export.json, a file) is refused with an
// InputError naming it, so an export never deletes data it did not write.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/qwen3_config.h"

namespace zero::model {

inline constexpr const char* kExportMarker = "zero_export.json";  // written into every export directory
inline constexpr const char* kExportTransformersVersion = "5.17.0";  // the format checked (FACTS.md)
inline constexpr int64_t kExportMaxPositions = 40960;  // Qwen3's released configs; RoPE has no hard limit

// An HF config.json for Qwen3ForSequenceClassification with num_labels 1, as save_pretrained writes it
// (every key of tests/fixtures/qwen3_rm_tiny/config.json), with RoPE in both spellings (top-level
// rope_theta for transformers 4.x, rope_parameters for 5.x) and both dtype keys (dtype, torch_dtype).
// pad_token_id -1 is written as null; eos_token_id as null, an integer or a list. parse_hf_config reads
// it back to the same Qwen3Config. `dtype` (F32 or BF16) is the weights' dtype.
nlohmann::json hf_config_json(const Qwen3Config& c, DType dtype = DType::F32);

// Fills `out` (exactly the tensor's element count) with the full fp32 value of the tensor named `name`
// (an HF name from qwen3_rm_groups). Throws on a missing tensor.
using TensorReader = std::function<void(const std::string& name, std::span<float> out)>;

struct ExportFile {
  std::filesystem::path source;  // copied byte for byte
  std::string name;              // file name inside OUT_DIR
};

struct HfExportOptions {
  DType dtype = DType::BF16;                   // F32 or BF16 (round to nearest even)
  std::vector<ExportFile> extra_files;         // e.g. tokenizer.json, tokenizer_config.json
  nlohmann::json provenance = nlohmann::json::object();  // merged into zero_export.json
};

struct HfExportReport {
  std::filesystem::path dir;     // OUT_DIR as written
  int64_t tensors = 0;
  int64_t parameters = 0;
  uint64_t safetensors_bytes = 0;
  bool replaced_previous = false;  // OUT_DIR held a previous export
};

// Whether export_hf_model may write `out_dir` (absent, empty, or a previous export, and no foreign
// OUT_DIR.tmp beside it): InputError naming the path when not; true when it holds a previous export.
// pmtrain checks run.export_dir with it before training, so a refusal does not wait for the run's end.
bool check_export_target(const std::filesystem::path& out_dir);

// Writes the HF model directory `out_dir` (see the header comment for atomicity and overwrite rules).
// InputError (naming the path) on a refused OUT_DIR or an I/O error; whatever `read` throws propagates
// (the temp directory is removed and OUT_DIR is untouched).
HfExportReport export_hf_model(const std::filesystem::path& out_dir, const Qwen3Config& config,
                               const TensorReader& read, const HfExportOptions& options);

}  // namespace zero::model
