// Which Qwen3 shape a run trains: an HF directory's config.json, a named preset, or a custom shape;
// and how its parameters get their first values (HF weights streamed tensor by tensor, or random init).
#pragma once
#include "model/param_access.h"
#include "model/qwen3_config.h"
#include "model/reward_model.h"
#include "pmtrain/config.h"
#include "zero/engine.h"

namespace zero::pmtrain {

// The Qwen3 architecture for this config; vocab_size 0 means the tokenizer's size (`tokenizer_vocab`).
model::Qwen3Config resolve_model_config(const ModelSection& m, int64_t tokenizer_vocab);
// The model's options from the model and loss sections (checkpointing, decay flags, model.attention, the
// loss's centering), for training, planning and scoring alike.
model::RewardModelOptions reward_model_options(const Config& cfg);

// Fills the engine's parameters: from model.hf_dir when set (streamed), else a seeded random init drawn on
// `threads` host threads (init_threads; the numbers do not depend on it). Each rank makes or reads only the
// elements it keeps (Engine::kept_tensor_range: at stage 3, its shard). Returns a one-line description for the
// log, with the time it took.
std::string init_model_parameters(Engine& engine, const ModelSection& m, const model::Qwen3Config& qc,
                                  const std::vector<model::GroupSpec>& groups, int threads);

// Host threads for the random init, a one-time job before the first step: the config's `threads`, or this
// rank's share of the node's cores when that is more (the CPUs it may run on, at most the node's cores over
// its ranks on the node), so the eight GPU ranks of a node do not each draw their samples on one core.
int init_threads(int configured, int ranks_on_node);

// A rank's share of a node's cores: the node's cores over its ranks on the node, at most the CPUs the rank may
// run on, at least 1. init_threads' rule for this node; the planner's for a node like its profile's.
int core_share(int node_cores, int usable_cpus, int ranks_on_node);

// `threads` that the config, --set and OMP_NUM_THREADS leave out (ThreadsFrom::Default): this rank's share of
// the node's cores (init_threads' rule), as OpenMP takes a process's cores, split among the node's ranks.
// Called where a command learns its ranks on the node, before its backend is made; the config then records
// the number (ThreadsFrom::CoreShare). The CPU backend's bits do not depend on it (model/cpu/parallel.h).
void resolve_rank_threads(Config& cfg, int ranks_on_node);

// "" at one thread a rank, or when `threads` of them fit this rank's CPUs and, with ranks_on_node ranks, the node's
// cores; else what oversubscribes, for a warning at the start (threads that outnumber their cores contend for them,
// OpenMP's spinning: a step many times slower, nothing wrong in the numbers).
std::string threads_oversubscription(int threads, int ranks_on_node);

}  // namespace zero::pmtrain
