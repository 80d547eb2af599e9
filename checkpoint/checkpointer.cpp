#include "checkpoint/checkpointer.h"

#include <filesystem>
#include <limits>

#include "checkpoint/shard_layout.h"
#include "checkpoint/verify.h"

namespace zero::checkpoint {

Checkpointer::Checkpointer(Engine& engine, CheckpointOptions opts)
    : engine_(engine),
      comm_(opts.world ? *opts.world : engine.comm()),
      files_(engine.comm().world()),
      writes_(engine.replicas() == nullptr || engine.replicas()->rank() == 0),
      opts_(std::move(opts)),
      paths_(opts_.run_dir),
      faults_(FaultPlan::from_env()) {
  ZERO_REQUIRE(comm_.world() == engine_.data_world(), ConfigError,
               "checkpoints of an engine sharded over groups of {} ranks need the run's communicator over all {} "
               "ranks (CheckpointOptions::world; given: {} ranks)",
               files_, engine_.data_world(), comm_.world());
  ZERO_REQUIRE(!opts_.run_dir.empty(), ConfigError, "checkpointing needs a run directory (got an empty path)");
  ZERO_REQUIRE(opts_.retention.keep_last >= 1, ConfigError, "checkpoint keep_last must be at least 1 (got {})",
               opts_.retention.keep_last);
  ZERO_REQUIRE(opts_.retention.keep_every >= 0, ConfigError, "checkpoint keep_every must be 0 or positive (got {})",
               opts_.retention.keep_every);
}

Checkpointer::~Checkpointer() = default;  // AsyncWriter joins its thread

Manifest Checkpointer::describe(const TrainState& state) const {
  Manifest m;
  m.step = state.step;
  m.world = files_;
  m.shard_groups = engine_.data_world() / files_;
  m.stage = engine_.config().stage;
  m.optimizer_step = engine_.optimizer_step();
  m.config = opts_.config_text;
  m.groups = describe_groups(engine_.groups(), engine_.partition());
  m.state = state;
  return m;
}

void Checkpointer::save(const TrainState& state) {
  ZERO_REQUIRE(state.step >= 0, ConfigError, "checkpoint step must be non-negative (got {})", state.step);
  wait();
  Pending p{state.step, describe(state)};
  if (auto f = agree(comm_, capture([&] {
        if (comm_.rank() == 0) prepare_tmp_dir(paths_, p.step);
      })))
    fail_save(p.step, *f);
  const int r = engine_.rank();  // the file's: the rank in the shard group
  const std::string file = (std::filesystem::path(paths_.tmp_dir(p.step)) / file_name_for_rank(r)).string();
  if (!writes_) {  // another shard group's replica writes this shard; this rank only agrees
    if (opts_.async) pending_ = std::move(p);
    else finalize(std::move(p), WrittenFile{}, std::nullopt);
    return;
  }
  if (opts_.async) {
    HostVector<char> snapshot = read_rank_file(engine_);  // host copy: the write never touches the engine
    writer_.start(file, std::move(snapshot), faults_.for_write(r, p.step));
    pending_ = std::move(p);
    return;
  }
  // Synchronous: the engine's own host arrays as they are (nothing changes them before the write returns),
  // else its backend's streamed through one host buffer (kRankFileChunkBytes): no host image of the file.
  FaultCounter counter(faults_.for_write(r, p.step));
  WrittenFile mine;
  const auto local = capture([&] {
    FileWriter out(file, &counter);
    if (auto in_place = rank_file_segments(engine_))
      for (const Segment& s : *in_place) out.append(s.data, s.bytes);
    else
      stream_rank_file(engine_, [&](const void* data, size_t bytes) { out.append(data, bytes); }, opts_.chunk_bytes);
    mine = out.finish();
  });
  finalize(std::move(p), mine, local);
}

bool Checkpointer::finish_pending() {
  if (!pending_) return false;
  double done = !writes_ || writer_.done() ? 1.0 : 0.0;
  comm_.all_reduce_scalars(&done, 1, ReduceOp::Min);
  if (done < 1.0) return false;
  wait();
  return true;
}

void Checkpointer::wait() {
  if (!pending_) return;
  Pending p = std::move(*pending_);
  pending_.reset();
  const AsyncWriter::Result res = writes_ ? writer_.wait() : AsyncWriter::Result{};
  finalize(std::move(p), res.file, res.error);
}

void Checkpointer::finalize(Pending p, const WrittenFile& mine, const std::optional<Failure>& local) {
  const int r = comm_.rank(), q0 = engine_.rank();
  if (auto f = agree(comm_, local)) fail_save(p.step, *f);  // also the barrier before the rename
  // Gather every file's size and hash (exact in doubles: sizes < 2^53, hashes as two 32-bit halves), each
  // from the rank that wrote it.
  std::vector<double> v(3 * size_t(files_), 0.0);
  if (writes_) {
    v[3 * q0] = double(mine.bytes);
    v[3 * q0 + 1] = double(mine.xxh64 >> 32);
    v[3 * q0 + 2] = double(mine.xxh64 & 0xffffffffu);
  }
  comm_.all_reduce_scalars(v.data(), v.size(), ReduceOp::Sum);
  for (int q = 0; q < files_; ++q)
    p.manifest.files.push_back({file_name_for_rank(q), q, uint64_t(v[3 * q]),
                                (uint64_t(v[3 * q + 1]) << 32) | uint64_t(v[3 * q + 2])});
  if (auto f = agree(comm_, capture([&] {
        if (r != 0) return;
        const std::string text = p.manifest.to_json().dump(2) + "\n";
        const PublishFaults faults = faults_.for_publish(r, p.step);
        FaultCounter manifest_faults(midway(faults.manifest, text.size()));
        write_file((std::filesystem::path(paths_.tmp_dir(p.step)) / kManifestName).string(),
                   {Segment{text.data(), text.size()}}, &manifest_faults);
        publish(paths_, p.step, faults);
        apply_retention(paths_, opts_.retention, p.step);
      })))
    fail_save(p.step, *f);
  last_published_ = p.step;
}

void Checkpointer::fail_save(int64_t step, const Failure& f) {
  if (comm_.rank() == 0) discard_tmp(paths_, step);
  comm_.barrier();  // every rank returns only once the temp dir is gone
  throw SaveError(fmt::format("saving checkpoint step_{} under {} failed: {}. The previous checkpoint and `latest` "
                              "are unchanged.", step, paths_.root, f.message));
}

std::optional<std::string> Checkpointer::resume_path(const std::string& spec) {
  verified_.clear();
  if (spec != "auto") return spec;
  // Rank 0 finds the newest checkpoint whose files are all there at their sizes (newest_complete_step); then every rank
  // hashes its share of that one's files (file q by rank q mod W), all at once, each file once: not all of them
  // by rank 0 while the others wait (85 GiB at Qwen3-8B), and not again by the load. A checkpoint that any rank
  // finds corrupted is skipped, in that rank's words (said by rank 0), for the next older one.
  const RunPaths paths(opts_.run_dir);
  double below = std::numeric_limits<double>::infinity();
  for (;;) {
    double chosen = -1;
    if (comm_.rank() == 0)
      if (const auto step = newest_complete_step(paths, below, [](int64_t skip, const std::string& problem) {
            fprintf(stderr, "checkpoint: resume auto: skipping step_%lld: %s\n", (long long)skip, problem.c_str());
          }))
        chosen = double(*step);
    comm_.all_reduce_scalars(&chosen, 1, ReduceOp::Max);
    if (chosen < 0) return std::nullopt;
    const std::string dir = paths.step_dir(int64_t(chosen));
    if (!opts_.verify_checksums) return dir;
    const std::string problem = checkpoint_problem_shared(comm_, dir, opts_.on_read);
    if (problem.empty()) {
      verified_ = dir;
      return dir;
    }
    if (comm_.rank() == 0)
      fprintf(stderr, "checkpoint: resume auto: skipping step_%lld: %s\n", (long long)chosen, problem.c_str());
    below = chosen;
  }
}

void Checkpointer::amend_extra(int64_t step, const nlohmann::json& patch) {
  wait();
  run_agreed(comm_, [&] {
    if (comm_.rank() != 0) return;
    const std::string file = (std::filesystem::path(paths_.step_dir(step)) / kManifestName).string();
    Manifest m = Manifest::parse(read_small_file(file), file, step);
    if (!m.state.extra.is_object()) m.state.extra = nlohmann::json::object();
    m.state.extra.merge_patch(patch);
    replace_file_atomic(file, m.to_json().dump(2) + "\n");
    apply_retention(paths_, opts_.retention, latest_step(paths_).value_or(step));
  });
}

LoadResult Checkpointer::load(const std::string& dir) {
  wait();
  // The checkpoint resume_path just hashed on every rank is not hashed again (once).
  const bool hashed = !verified_.empty() && dir == verified_;
  verified_.clear();
  return load_checkpoint(engine_, dir, opts_.verify_checksums && !hashed, opts_.chunk_bytes, &comm_, opts_.on_read);
}

}  // namespace zero::checkpoint
