// Reward model -> HF model directory (config.json + model.safetensors + extra files), atomically.
#include "model/hf_export.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "model/param_layout.h"

namespace zero::model {

namespace fs = std::filesystem;
using nlohmann::json;

json hf_config_json(const Qwen3Config& c, DType dtype) {
  ZERO_REQUIRE(dtype == DType::F32 || dtype == DType::BF16, ConfigError,
               "hf_config_json: dtype must be F32 or BF16, got {}", dtype_name(dtype));
  const char* torch_dtype = dtype == DType::BF16 ? "bfloat16" : "float32";
  json eos = nullptr;
  if (c.eos_token_ids.size() == 1) eos = c.eos_token_ids[0];
  else if (c.eos_token_ids.size() > 1) eos = c.eos_token_ids;
  json layer_types = json::array();
  for (int64_t l = 0; l < c.num_layers; ++l) layer_types.push_back("full_attention");
  json j = json::object();
  j["architectures"] = json::array({"Qwen3ForSequenceClassification"});
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = nullptr;  // Qwen3 adds no BOS token
  j["dtype"] = torch_dtype;        // transformers >= 4.56 / 5.x
  j["torch_dtype"] = torch_dtype;  // older 4.x
  j["eos_token_id"] = eos;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["id2label"] = json::object({{"0", "LABEL_0"}});
  j["initializer_range"] = c.initializer_range;
  j["intermediate_size"] = c.intermediate_size;
  j["label2id"] = json::object({{"LABEL_0", 0}});
  j["layer_types"] = layer_types;
  j["max_position_embeddings"] = kExportMaxPositions;
  j["max_window_layers"] = c.num_layers;
  j["model_type"] = "qwen3";
  j["num_attention_heads"] = c.num_heads;
  j["num_hidden_layers"] = c.num_layers;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["num_labels"] = 1;
  j["pad_token_id"] = c.pad_token_id >= 0 ? json(c.pad_token_id) : json(nullptr);
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_parameters"] = json::object({{"rope_theta", c.rope_theta}, {"rope_type", "default"}});  // 5.x
  j["rope_theta"] = c.rope_theta;                                                                // 4.x
  j["sliding_window"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["transformers_version"] = kExportTransformersVersion;
  j["use_cache"] = true;
  j["use_sliding_window"] = false;
  j["vocab_size"] = c.vocab_size;
  return j;
}

namespace {

[[noreturn]] void io_fail(const std::string& what, const fs::path& p, int err) {
  throw InputError(fmt::format("export: {} {} failed: {} (errno {})", what, p.string(), std::strerror(err), err));
}

void fsync_path(const fs::path& p, bool dir) {
  const int fd = ::open(p.c_str(), dir ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) io_fail("opening", p, errno);
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    io_fail("fsync of", p, e);
  }
  ::close(fd);
}

void write_text(const fs::path& p, const std::string& text) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) io_fail("creating", p, errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      ::close(fd);
      io_fail("writing", p, e);
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    io_fail("fsync of", p, e);
  }
  if (::close(fd) != 0) io_fail("closing", p, errno);
}

void copy_into(const fs::path& src, const fs::path& dst) {
  ZERO_REQUIRE(fs::is_regular_file(src), InputError, "export: {} is missing or not a file", src.string());
  std::error_code ec;
  fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
  if (ec) throw InputError(fmt::format("export: copying {} to {} failed: {}", src.string(), dst.string(), ec.message()));
  fs::permissions(dst, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read,
                  ec);  // a read-only source (bundled assets) should not make the export read-only
  fsync_path(dst, false);
}

bool dir_is_empty(const fs::path& p) {
  std::error_code ec;
  return fs::directory_iterator(p, ec) == fs::directory_iterator();
}

bool is_export_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / kExportMarker, ec);
}

// "out/" -> "/abs/out"; refuses paths whose sibling OUT_DIR.tmp would be meaningless ("", ".", "..", "/").
fs::path normalize_out(const fs::path& given) {
  fs::path p = given.lexically_normal();
  if (!p.empty() && !p.has_filename()) p = p.parent_path();
  const std::string f = p.filename().string();
  ZERO_REQUIRE(!p.empty() && f != "." && f != ".." && !f.empty(), InputError,
               "export: the output directory '{}' must name a directory (not '.', '..' or '/')", given.string());
  return fs::absolute(p).lexically_normal();
}

void remove_quietly(const fs::path& p) noexcept {
  std::error_code ec;
  fs::remove_all(p, ec);
}

void rename_or_fail(const fs::path& from, const fs::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) io_fail(fmt::format("renaming {} to", from.string()), to, errno);
}

// Swaps `tmp` (complete) with the previous export at `out`; afterwards tmp holds the old export.
void replace_previous(const fs::path& tmp, const fs::path& out) {
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) {
    remove_quietly(tmp);
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) io_fail(fmt::format("exchanging {} with", tmp.string()), out, errno);
#endif
  // No atomic exchange here: move the old export aside, rename, remove it. A crash in between leaves
  // OUT_DIR.old (complete) and OUT_DIR.tmp (complete): both are exports.
  const fs::path old = out.string() + ".old";
  if (fs::exists(old)) {
    ZERO_REQUIRE(is_export_dir(old) || dir_is_empty(old), InputError,
                 "export: {} exists and was not left by an export; remove it", old.string());
    remove_quietly(old);
  }
  rename_or_fail(out, old);
  rename_or_fail(tmp, out);
  remove_quietly(old);
}

}  // namespace

bool check_export_target(const fs::path& out_dir) {
  const fs::path out = normalize_out(out_dir);
  const fs::path tmp = out.string() + ".tmp";
  std::error_code ec;
  // Where we may write: an absent or empty OUT_DIR, or a previous export.
  const fs::file_status st = fs::symlink_status(out, ec);
  bool previous = false;
  if (fs::exists(st)) {
    ZERO_REQUIRE(fs::is_directory(st), InputError,
                 "export: {} exists and is not a directory{}: refusing to replace it", out.string(),
                 fs::is_symlink(st) ? " (a symlink)" : "");
    previous = is_export_dir(out);
    ZERO_REQUIRE(previous || dir_is_empty(out), InputError,
                 "export: refusing to write into {}: it is not empty and not a previous export (no {} in it); "
                 "choose another directory or remove it", out.string(), kExportMarker);
  }
  // A stale temp dir from a crashed export is ours to remove; anything else there is not.
  if (fs::exists(fs::symlink_status(tmp, ec)))
    ZERO_REQUIRE(fs::is_directory(fs::symlink_status(tmp, ec)) && (is_export_dir(tmp) || dir_is_empty(tmp)),
                 InputError, "export: {} exists and was not left by an export; remove it", tmp.string());
  return previous;
}

HfExportReport export_hf_model(const fs::path& out_dir, const Qwen3Config& config, const TensorReader& read,
                               const HfExportOptions& options) {
  ZERO_REQUIRE(options.dtype == DType::F32 || options.dtype == DType::BF16, ConfigError,
               "export: dtype must be fp32 or bf16, got {}", dtype_name(options.dtype));
  config.validate("export: model config");
  const fs::path out = normalize_out(out_dir);
  const fs::path tmp = out.string() + ".tmp";
  std::error_code ec;
  const bool previous = check_export_target(out);
  const bool exists = fs::exists(fs::symlink_status(out, ec));
  if (fs::exists(fs::symlink_status(tmp, ec))) remove_quietly(tmp);  // a crashed export's (checked above)
  if (!out.parent_path().empty()) {
    fs::create_directories(out.parent_path(), ec);
    if (ec) throw InputError(fmt::format("export: creating {} failed: {}", out.parent_path().string(), ec.message()));
  }
  fs::create_directory(tmp, ec);
  if (ec) throw InputError(fmt::format("export: creating {} failed: {}", tmp.string(), ec.message()));

  HfExportReport report;
  report.dir = out;
  report.replaced_previous = previous;
  const char* dtype_str = options.dtype == DType::BF16 ? "bf16" : "fp32";
  try {
    // The marker first, so that a stale temp dir is recognisably ours.
    json marker = options.provenance.is_object() ? options.provenance : json::object();
    marker["format"] = "zero-hf-export";
    marker["format_version"] = 1;
    marker["dtype"] = dtype_str;
    write_text(tmp / kExportMarker, marker.dump(2) + "\n");
    write_text(tmp / "config.json", hf_config_json(config, options.dtype).dump(2) + "\n");

    const std::vector<GroupSpec> groups = qwen3_rm_groups(config);
    std::vector<checkpoint::SafetensorsDecl> decls;
    for (const GroupSpec& g : groups)
      for (const TensorSpec& t : g.tensors) decls.push_back({t.name, options.dtype, t.shape});
    const fs::path st_path = tmp / "model.safetensors";
    {
      checkpoint::SafetensorsWriter w(st_path, decls, {{"format", "pt"}});
      std::vector<float> buf;
      for (const GroupSpec& g : groups)
        for (const TensorSpec& t : g.tensors) {
          buf.assign(size_t(t.numel()), std::numeric_limits<float>::quiet_NaN());
          read(t.name, buf);
          w.write(t.name, buf);
          ++report.tensors;
          report.parameters += t.numel();
        }
      w.finish();
    }
    fsync_path(st_path, false);
    report.safetensors_bytes = fs::file_size(st_path);

    for (const ExportFile& f : options.extra_files) {
      ZERO_REQUIRE(!f.name.empty() && f.name.find('/') == std::string::npos && f.name != "config.json" &&
                       f.name != "model.safetensors" && f.name != kExportMarker,
                   InputError, "export: extra file name '{}' is not allowed", f.name);
      copy_into(f.source, tmp / f.name);
    }
    fsync_path(tmp, true);

    if (!exists) {
      rename_or_fail(tmp, out);
    } else if (!previous) {  // an empty directory: replace it
      fs::remove(out, ec);
      if (ec) throw InputError(fmt::format("export: removing the empty directory {} failed: {}", out.string(), ec.message()));
      rename_or_fail(tmp, out);
    } else {
      replace_previous(tmp, out);
    }
  } catch (...) {
    remove_quietly(tmp);
    throw;
  }
  fsync_path(out.parent_path().empty() ? fs::path(".") : out.parent_path(), true);
  return report;
}

}  // namespace zero::model
