// `pmtrain plan`: the grid of stages x worlds x memory sizes, the recommendation, --json and --sbatch.
#include "pmtrain/plan_command.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/token_cache.h"
#include "data/tokenizer.h"
#include "model/activation_plan.h"
#include "model/attention.h"
#include "model/reward_model.h"
#include "pmtrain/calibrate.h"
#include "pmtrain/cli.h"
#include "pmtrain/commands.h"
#include "pmtrain/data_setup.h"
#include "pmtrain/engine_assembly.h"
#include "pmtrain/engine_params.h"
#include "pmtrain/metrics.h"
#include "pmtrain/model_setup.h"
#include "pmtrain/paths.h"
#include "pmtrain/train_split.h"
#include "pmtrain/planner.h"
#include "pmtrain/stop_signals.h"
#include "zero/buffer_plan.h"
#include "zero/comm_plan.h"
#include "zero/step_traffic.h"

namespace zero::pmtrain {

size_t parse_size(const std::string& text, const std::string& what) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  std::string unit(p, end);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  double scale = 0;
  if (unit == "gib" || unit == "gb" || unit == "g") scale = double(1ull << 30);
  if (unit == "mib" || unit == "mb" || unit == "m") scale = double(1ull << 20);
  if (unit == "tib" || unit == "tb" || unit == "t") scale = double(1ull << 40);
  ZERO_REQUIRE(ec == std::errc() && p != text.data() && scale > 0 && v > 0, ConfigError,
               "{} '{}' is not a size: write a number and a unit, e.g. 24GiB, 80GB (binary: 24GB = 24 GiB), 512MiB",
               what, text);
  return size_t(v * scale);
}

std::vector<int> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    int v = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    ZERO_REQUIRE(ec == std::errc() && p == item.data() + item.size() && !item.empty() && v >= 1, ConfigError,
                 "{} '{}': '{}' is not a whole number >= 1 (e.g. {} 1,2,4,8)", what, text, item, what);
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

namespace {

std::string time_text(double s) {
  if (s >= 3600) return fmt::format("{:.1f} h", s / 3600);
  if (s >= 60) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.2f} s", s);
}

// A GPU rank's CPUs in the launch `pmtrain plan` writes (--sbatch): kGpuRankCpus (its data, NCCL and launcher
// threads, and an offloaded AdamW) or the config's `threads` when more. The script exports --cpus-per-task as
// OMP_NUM_THREADS, which a run takes as `threads` where the config and --set leave that key out
// (Config::threads_from): so a GPU rank then steps an offloaded AdamW on kGpuRankCpus threads (gpu_rank_threads),
// and its plan prices it so. A CPU rank gets its math threads (cpu_rank_threads).
constexpr int64_t kGpuRankCpus = 8;
int64_t gpu_rank_cpus(const Config& cfg) {
  return std::max(kGpuRankCpus, cfg.threads_from == ThreadsFrom::Config ? cfg.threads : int64_t(1));
}
int64_t gpu_rank_threads(const Config& cfg) {
  return cfg.threads_from == ThreadsFrom::Config ? cfg.threads : gpu_rank_cpus(cfg);
}

// The training data at its own lengths under the config's batch layout: what the epoch time prices.
struct DataLengths {
  int64_t pairs = 0;           // 0: not read (--dataset-pairs gave the count); the epoch is then at max_len
  double tokens_per_pair = 0;  // tokens computed a pair: both answers, a shared prompt once
  double scores_per_pair = 0;  // causal attention scores the kernels compute a pair
  double shared = 0;           // the share of the answers' tokens stored once as shared prompts
};

// What every cell of the grid shares.
struct Setup {
  Config cfg;
  model::Qwen3Config qc;
  std::vector<GroupInfo> groups;
  PlanDevice device = PlanDevice::Cpu;
  ComputeProfile prof;
  int64_t global = 0, pairs = 0;
  DataLengths data;
  int64_t micro = 0;  // fixed by --micro or by a token budget, else searched
  // batch.micro_tokens > 0: micro-batches hold at most this many tokens; the plan takes every sequence at
  // data.max_len (the worst case), so a micro-batch is `micro` pairs and a step at most ceil(per rank /
  // micro) micro-steps. The budget is the user's knob: the plan reports it, it does not search a micro.
  int64_t micro_tokens = 0;
  size_t baseline = cpu_process_baseline_bytes();
  std::string intra_name;  // --intra-link; empty: by GPU size
  Link inter{};
  // The link between GPUs of a node: as given, else NVLink for 80 GiB-class parts (H100/A100 SXM
  // nodes), PCIe 4 for smaller ones.
  const Link& intra(size_t mem) const {
    return find_link(!intra_name.empty() ? intra_name : mem >= (size_t(80) << 30) ? "nvlink-h100" : "pcie4");
  }
};

struct Cell {
  int stage = 0, world = 1, per_node = 1, nodes = 1;
  size_t mem = 0;      // what one rank may use
  MemoryPlan m;        // at the chosen micro (micro 1 when nothing fits)
  bool fits = false;
  int64_t micro = 1, accum = 1;
  StepTraffic traffic;
  double compute_s = 0, elementwise_s = 0, comm_s = 0, exposed_comm_s = 0, step_s = 0, epoch_s = 0;
  double data_step_s = 0;  // a step at the data's own lengths (0: unknown, the epoch takes step_s)
  double data_compute_s = 0, data_elementwise_s = 0, data_comm_s = 0, data_exposed_comm_s = 0;  // its parts
  std::string link;
  std::string checkpointing;  // checkpointing_text: the config's, or what auto chose for this cell
  int64_t micro_tokens = 0;   // the token budget: the config's, or what auto chose for this cell (0: pairs)
  int64_t threads = 1;        // a rank's CPUs: a CPU rank's math threads (cpu_rank_threads), a GPU rank's gpu_rank_cpus
};

Config with_stage(const Config& cfg, int stage) {
  Config c = cfg;
  c.zero.stage = stage;
  return c;
}

// One micro-step's work as the time model prices it: tokens computed, answers pooled, and the causal
// attention scores the kernels compute (the sum of L (L + 1) / 2 over attention sequences; a shared-prompt
// pair is one sequence, its hidden span computed before it is masked).
struct MicroWork {
  double tokens = 0, seqs = 0, scores = 0;
};

// `micro` pairs with every sequence at data.max_len: the worst case the memory plan is made for.
MicroWork max_len_work(const Setup& s, int64_t micro) {
  const double n = double(s.cfg.data.max_len), seqs = 2.0 * double(micro);
  return {seqs * n, seqs, seqs * n * (n + 1) / 2};
}

// The training data's pairs at their own lengths (DataLengths) in the micro-steps of cell c's step: under a
// token budget as many as the rank's tokens need (at least one, at most one a pair), else c.accum.
MicroWork data_work(const Setup& s, const Cell& c, int64_t& micro_steps) {
  const double per_rank = double(s.global / c.world);
  micro_steps = c.accum;
  if (s.micro_tokens > 0)
    micro_steps = std::clamp<int64_t>(int64_t(std::ceil(per_rank * s.data.tokens_per_pair / double(s.micro_tokens))), 1,
                                      int64_t(per_rank));
  const double pairs = per_rank / double(micro_steps);
  return {pairs * s.data.tokens_per_pair, 2.0 * pairs, pairs * s.data.scores_per_pair};
}

struct StepTime {
  double compute_s = 0, elementwise_s = 0, comm_s = 0;
  double exposed_comm_s = 0;  // what of comm_s the compute does not hide (all of it on the CPU)
  StepTraffic traffic;
  std::string link;
  double total() const { return compute_s + elementwise_s + exposed_comm_s; }
};

// The share of a phase's collectives that is one unit (a bucket, or a gathered group).
double unit_share(const Partition& part, size_t bucket_elements) {
  const size_t unit = std::max(std::min(bucket_elements, part.total_padded), part.max_unit_padded);
  return std::min(1.0, double(unit) / double(part.total_padded));
}

// What of `comm_s` seconds of a phase's collectives the phase's `window` seconds of compute do not hide.
double exposed_in(double comm_s, double window, double unit_share) {
  return std::max(comm_s - window, comm_s * unit_share);
}

// On a GPU the collectives run on NCCL's stream beside the compute stream, in the phases the engine issues
// them (zero/comm_plan.h): a phase's comm time hides behind that phase's GEMMs and attention, except what
// does not fit in it and, at least, one unit's share (the last bucket reduced after backward ends, the first
// group gathered before forward starts: nothing runs beside them); the all-gather after the step is exposed.
// Assumed, not measured (one GPU here): NCCL's own SMs slowing the kernels they overlap are not priced.
// `forward_s`, `backward_s`: one micro-step's compute in each pass.
double exposed_comm_on_gpu(const StepTime& t, const Partition& part, size_t bucket_elements, double forward_s,
                           double backward_s, int64_t micro_steps) {
  const StepTraffic& tr = t.traffic;
  if (tr.wire_bytes <= 0 || t.comm_s <= 0) return 0;
  const double share = unit_share(part, bucket_elements);
  const double seconds_per_byte = t.comm_s / tr.wire_bytes;  // the link's rate, or the measured collectives'
  const auto exposed = [&](double bytes, double window) { return exposed_in(bytes * seconds_per_byte, window, share); };
  const double k = double(micro_steps);
  return k * exposed(tr.forward_bytes, forward_s) + k * exposed(tr.backward_bytes, backward_s) +
         exposed(tr.last_backward_bytes, backward_s) + tr.after_step_bytes * seconds_per_byte;
}

// A CPU rank's math threads in cell c: the config's (the file, --set or OMP_NUM_THREADS), else its share of the
// cores of a node like the profile's (resolve_rank_threads' rule, which the run applies on its node).
int64_t cpu_rank_threads(const Setup& s, const Cell& c) {
  return s.cfg.threads_from == ThreadsFrom::Default ? core_share(s.prof.cores, s.prof.cores, c.per_node) : s.cfg.threads;
}

// A CPU rank's compute speed in cell c against the profile's: the products and the element-wise work are cut
// over the rank's threads (model/cpu/parallel.h, zero/parallel_parts.h), priced as linear in them from the
// threads the profile was measured with (an assumption; `pmtrain calibrate` at the run's threads measures it
// instead), and ranks whose threads outnumber the node's cores share them.
double cpu_rank_speed(const Setup& s, const Cell& c) {
  const double t = double(c.threads);
  return t / double(s.prof.threads) * std::min(1.0, double(s.prof.cores) / (double(c.per_node) * t));
}

// Step time: GEMM FLOPs (6 x matmul params x tokens, plus causal attention, plus a recomputed forward
// with full checkpointing) at the profile's GEMM speed; element-wise passes (activations written and read,
// those a checkpointed backward writes again (selective: the element-wise ones only, no GEMM) included,
// the embedding gradient zeroed, the accumulator, the optimizer) at its bandwidth; the collectives at
// the link's, hidden behind the compute on a GPU as exposed_comm_on_gpu says (on the CPU, MPI's collectives
// progress only while a rank waits: none hidden). Ranks beyond the cores of a CPU node share them.
// `micro_steps` micro-steps of work w each, on cell c's stage, world and ranks per node.
StepTime step_time(const Setup& s, const Partition& part, const Cell& c, const MicroWork& w, int64_t micro_steps) {
  const model::Qwen3Config& q = s.qc;
  const double T = w.tokens, L = double(q.num_layers), steps = double(micro_steps);
  const double attn_fwd = L * model::attention_flops(w.scores, double(q.q_dim()), 1.0);
  const model::ActivationPlan ap =
      model::plan_activations(q, int64_t(std::ceil(T)), int64_t(std::ceil(w.seqs)), s.cfg.model.activation_checkpointing,
                              activation_dtypes(s.cfg, s.device), s.cfg.model.selective_layers,
                              s.cfg.model.recompute_attention);
  const double recomputed = double(ap.full_layers) / L;  // the share of layers whose forward runs twice
  const double attention_recomputed = double(ap.attention_recomputed_layers) / L;  // of those, attention's too
  // Each projection's three GEMMs (forward, input and weight gradient; the forward again where recomputed)
  // at their own measured rates for T tokens of that shape (else the profile's one gemm_flops).
  using Pass = ComputeProfile::GemmPass;
  double fwd_s = 0, bwd_s = 0;
  for (const auto& [in, out] : projection_shapes(q)) {
    const double flops = 2.0 * T * L * double(in) * double(out);
    fwd_s += flops / s.prof.gemm_rate(T, in, out, Pass::Forward);
    bwd_s += flops / s.prof.gemm_rate(T, in, out, Pass::InputGrad) + flops / s.prof.gemm_rate(T, in, out, Pass::WeightGrad);
  }
  const double attn = attn_fwd * (model::kAttentionForwardBackwardPasses + attention_recomputed);
  const double speed = s.device == PlanDevice::Cpu ? cpu_rank_speed(s, c) : 1.0;
  StepTime t;
  // Attention at its own measured rate where the profile has one (short sequences and softmax make it slower
  // than a GEMM of the same FLOPs), else at the GEMMs'.
  const double attn_rate = s.prof.attention_flops > 0 ? s.prof.attention_flops : s.prof.gemm_flops;
  t.compute_s = steps * (fwd_s * (1.0 + recomputed) + bwd_s + attn / attn_rate) / speed;
  // One micro-step's compute in each pass (the recomputed forward runs in backward): what collectives can hide behind.
  const double forward_window = (fwd_s + attn_fwd / attn_rate) / speed;
  const double backward_window = t.compute_s / steps - forward_window;

  const EngineConfig ec = engine_config(with_stage(s.cfg, c.stage), c.world, micro_steps, 1);
  const double p = double(dtype_size(ec.param_dtype)), a = double(dtype_size(ec.accum_dtype));
  const double act = double(ap.per_layer_forward) * L + double(ap.recomputed);
  // Per micro-step: activations written and read in both passes, the embedding gradient zeroed, each gradient
  // view's non-finite count and its fold into the accumulator (written by the first micro-step, added into by the
  // rest; at the profile's gradient_bytes where it has one). Per step: the norm, AdamW (at its own rate), the cast
  // back to parameters (none for a split master or fp32 parameters: casts_params); at stage 0 the accumulator also
  // goes through the all-reduce's send buffer and back. Each at the bytes the engine declares (zero/step_traffic.h).
  const DType pt = ec.param_dtype, at = ec.accum_dtype;
  const double psi = double(part.total_padded), shard = double(c.stage == 0 ? part.total_padded : part.total_shard);
  const double micro_bytes = 4.0 * act + double(q.vocab_size * q.hidden_size) * p;
  const double gradient_bytes = psi * (steps * traffic::finite_count(pt) + traffic::accumulate(pt, at, true) +
                                       (steps - 1) * traffic::accumulate(pt, at, false));
  const double gradient_rate = s.prof.gradient_bytes > 0 ? s.prof.gradient_bytes : s.prof.elementwise_bytes;
  const double cast = casts_params(ec) ? traffic::cast_params(pt) : 0;
  const double step_bytes = shard * (traffic::grad_norm(at) + cast) +
                            (c.stage == 0 && c.world > 1 ? 2 * psi * traffic::pack(at, ec.reduce_dtype) : 0);
  const double adamw_rate = s.prof.adamw_elements > 0 ? s.prof.adamw_elements : s.prof.elementwise_bytes / traffic::adamw(at);
  t.elementwise_s = (steps * micro_bytes + step_bytes) / (s.prof.elementwise_bytes * speed) +
                    gradient_bytes / (gradient_rate * speed) + shard / (adamw_rate * speed);
  if (ec.offload_optimizer && s.device == PlanDevice::Gpu) {
    // zero.offload: AdamW and the cast run on the rank's host threads (gpu_rank_threads: those of the launch
    // --sbatch writes) instead of the device, the gradients come down while the host steps the chunk before (the
    // slower of the two) and the params go up while it casts the next. Assumed, not measured (a profile has no
    // host side for a GPU): pinned copies over PCIe Gen5 x16 at kOffloadLinkBytes, shared by the node's ranks; a
    // core steps kOffloadCoreElements elements a second, at most the node's memory bandwidth over 32 bytes an
    // element.
    constexpr double kOffloadLinkBytes = 20e9, kOffloadCoreElements = 200e6, kHostMemoryBytes = 200e9;
    const double ranks = double(c.per_node);
    const double host_rate =
        std::min(double(gpu_rank_threads(s.cfg)) * kOffloadCoreElements, kHostMemoryBytes / 32 / ranks);
    const double link = kOffloadLinkBytes / ranks;
    t.elementwise_s += std::max(shard * a / link, shard / host_rate) + shard * p / link - shard / (adamw_rate * speed);
  }
  // SwiGLU at its own measured speed: a forward per layer, again before backward when the layer is
  // recomputed (full or selective), and a backward.
  if (s.prof.swiglu_forward_elements > 0 && s.prof.swiglu_backward_elements > 0) {
    const double swiglu = steps * T * L * double(q.intermediate_size);
    const double forwards = s.cfg.model.activation_checkpointing == model::ActivationCheckpointing::None ? 1.0 : 2.0;
    t.elementwise_s += swiglu * (forwards / s.prof.swiglu_forward_elements + 1.0 / s.prof.swiglu_backward_elements) / speed;
  }

  // The collectives inside a shard group (all ranks without hybrid sharding), and those across the groups.
  // Groups are consecutive ranks: a group of at most a node's ranks stays on one node.
  const int S = part.world, R = c.world / S;
  const bool group_on_node = S <= c.per_node, replicas_on_node = c.nodes == 1;
  auto link = [&](bool on_node, double& bw) -> std::string {
    if (s.device == PlanDevice::Cpu) {
      // MPI over shared memory: a copy in and a copy out, one thread a rank, at the profile's element-wise rate
      // (of its `threads`) shared among the node's ranks as among that many threads on its cores.
      bw = s.prof.elementwise_bytes / 2 * std::min(1.0, double(s.prof.cores) / double(c.per_node * s.prof.threads));
      return "shared memory (from the profile)";
    }
    if (on_node) {
      bw = s.intra(c.mem).bytes_per_s;
      return std::string(s.intra(c.mem).name) + " (assumed)";
    }
    bw = std::min(s.intra(c.mem).bytes_per_s, s.inter.bytes_per_s);
    return std::string(s.inter.name) + " (assumed)";
  };
  double bw = 0;
  t.link = S == 1 ? "none" : link(group_on_node, bw);
  t.traffic = plan_step_traffic(ec, part, int(micro_steps), R);
  t.comm_s = bw > 0 ? t.traffic.wire_bytes / bw : 0;
  // Ranks on one node with the collectives measured at this group size (`mpirun -np W pmtrain calibrate`: MPI
  // on the CPU, NCCL on GPUs; at 1 rank the communicator still copies): the elements the step's collectives
  // move at that rate. Across nodes the link table stands (nothing here measures a network).
  if (group_on_node && s.prof.collectives.count(S)) {
    const ComputeProfile::CollectiveRates& rates = s.prof.collectives.at(S);
    t.comm_s = double(t.traffic.all_reduce) / rates.all_reduce + double(t.traffic.reduce_scatter) / rates.reduce_scatter +
               double(t.traffic.all_gather) / rates.all_gather;
    t.link = fmt::format("{}, measured at {} rank{}", s.device == PlanDevice::Cpu ? "MPI" : "NCCL", S, S == 1 ? "" : "s");
  }
  t.exposed_comm_s = s.device == PlanDevice::Gpu
                         ? exposed_comm_on_gpu(t, part, ec.bucket_elements, forward_window, backward_window, micro_steps)
                         : t.comm_s;
  if (R > 1) {
    // Hybrid sharding: each rank's shard all-reduced across the groups during the last backward (on a GPU hidden
    // behind it but for the last bucket's), on its own link.
    double across_bw = 0;
    const std::string across = link(replicas_on_node, across_bw);
    const double across_s = t.traffic.replica_wire_bytes / across_bw;
    t.comm_s += across_s;
    t.exposed_comm_s += s.device == PlanDevice::Gpu
                            ? exposed_in(across_s, backward_window, unit_share(part, ec.bucket_elements))
                            : across_s;
    t.link = fmt::format("{} in groups of {}, {} across {} groups", t.link, S, across, R);
  }
  return t;
}

// Cell c's step at data.max_len (the worst case, what `step` shows) and, when the data's lengths are known,
// at those (what the epoch time takes).
void predict_time(const Setup& s, const Partition& part, Cell& c) {
  const StepTime t = step_time(s, part, c, max_len_work(s, c.micro), c.accum);
  c.compute_s = t.compute_s, c.elementwise_s = t.elementwise_s, c.comm_s = t.comm_s, c.exposed_comm_s = t.exposed_comm_s;
  c.traffic = t.traffic, c.link = t.link;
  c.step_s = t.total();
  if (s.data.pairs > 0) {
    int64_t micro_steps = 0;
    const MicroWork w = data_work(s, c, micro_steps);
    const StepTime d = step_time(s, part, c, w, micro_steps);
    c.data_step_s = d.total();
    c.data_compute_s = d.compute_s, c.data_elementwise_s = d.elementwise_s, c.data_comm_s = d.comm_s;
    c.data_exposed_comm_s = d.exposed_comm_s;
  }
  c.epoch_s = std::ceil(double(s.pairs) / double(s.global)) * (c.data_step_s > 0 ? c.data_step_s : c.step_s);
}

Cell plan_fixed_cell(const Setup& s, int stage, int world, int per_node, size_t mem);

// activation_checkpointing auto: at each micro-batch the least recompute that fits (resolve_checkpointing, as
// the run chooses), and of those the micro-batch with the fastest epoch (more recompute buys a larger
// micro-batch: the time model weighs the two). A token budget fixes the micro-batch. Nothing fits: the smallest
// micro-batch at the least memory (what the table and the advice show).
Cell plan_auto_cell(const Setup& s, int stage, int world, int per_node, size_t mem) {
  const int64_t per_rank = s.global / world;
  std::vector<int64_t> micros;
  for (int64_t m = per_rank; m >= 1; --m)
    if (s.micro > 0 ? m == s.micro : per_rank % m == 0) micros.push_back(m);
  if (micros.empty()) micros.push_back(s.micro > 0 ? s.micro : 1);
  std::optional<Cell> best;
  for (const int64_t m : micros) {
    Setup t = s;
    t.micro = m;
    const int64_t accum = (per_rank + m - 1) / m;
    t.cfg = resolve_checkpointing(with_stage(s.cfg, stage), s.qc.num_layers, [&](const Config& c) {
      return double(plan_rank_memory(c, s.qc, s.groups, world, m, accum, s.device, s.baseline).total()) / double(mem);
    });
    Cell c = plan_fixed_cell(t, stage, world, per_node, mem);
    // micros run largest first: while nothing fits, each smaller one replaces the last.
    if (!best || (c.fits && (!best->fits || c.epoch_s < best->epoch_s * 0.999)) || (!c.fits && !best->fits))
      best = std::move(c);
  }
  return *best;
}

// The largest micro-batch (dividing global / world, so micro x accum x world = global exactly) that fits, at
// the config's checkpointing.
Cell plan_fixed_cell(const Setup& s, int stage, int world, int per_node, size_t mem) {
  Cell c;
  c.stage = stage, c.world = world, c.per_node = std::min(per_node, world);
  c.nodes = (world + c.per_node - 1) / c.per_node;
  c.mem = mem;
  const Config cfg = with_stage(s.cfg, stage);
  const int64_t per_rank = s.global / world;
  // Exact for pair batching (micro divides per_rank); under a token budget only "more than one" matters to
  // what the accumulation plans (accum_dtype_for sums there anyway).
  auto accum_of = [&](int64_t micro) { return (per_rank + micro - 1) / micro; };
  auto plan = [&](int64_t micro) {
    return plan_rank_memory(cfg, s.qc, s.groups, world, micro, accum_of(micro), s.device, s.baseline);
  };
  c.m = plan(s.micro > 0 ? s.micro : 1);
  c.micro = s.micro > 0 ? s.micro : 1;
  if (s.micro_tokens > 0) {
    c.fits = c.m.total() <= mem;
  } else {
    for (int64_t m = per_rank; m >= 1; --m) {
      if (per_rank % m || (s.micro > 0 && m != s.micro)) continue;
      MemoryPlan mp = plan(m);
      if (mp.total() <= mem) {
        c.fits = true, c.micro = m, c.m = mp;
        break;
      }
    }
  }
  c.accum = accum_of(c.micro);
  c.checkpointing = checkpointing_text(cfg.model, s.qc.num_layers);
  c.micro_tokens = s.micro_tokens;
  c.threads = s.device == PlanDevice::Cpu ? cpu_rank_threads(s, c) : gpu_rank_cpus(cfg);
  const EngineConfig ec = engine_config(cfg, world, c.accum, 1);
  predict_time(s, make_partition(s.groups, shard_group_ranks(cfg, world), ec.bucket_elements), c);
  return c;
}

// A cell at the config's checkpointing, or under auto the fastest that fits.
Cell plan_checkpointing_cell(const Setup& s, int stage, int world, int per_node, size_t mem) {
  return s.cfg.model.checkpointing_auto ? plan_auto_cell(s, stage, world, per_node, mem)
                                        : plan_fixed_cell(s, stage, world, per_node, mem);
}

// A cell of the grid. batch.micro_tokens auto: the choices the run would make on this cell's memory
// (resolve_auto_choices against the cell's plan, as plan_and_check_run: model.activation_checkpointing auto
// first, then the budget), then the cell at those choices, made once, as the run makes them.
Cell plan_cell(const Setup& s, int stage, int world, int per_node, size_t mem) {
  if (s.cfg.zero.shard_ranks == ZeroSection::kShardRanksNode) {
    Setup t = s;  // zero.shard_ranks node: the cell's ranks per node (a copy only then: Setup holds the lengths)
    resolve_shard_ranks(t.cfg, per_node);
    return plan_cell(t, stage, world, per_node, mem);
  }
  if (!s.cfg.batch.micro_tokens_auto) return plan_checkpointing_cell(s, stage, world, per_node, mem);
  const int64_t accum = s.global / world;  // more than one micro-step: a budget's accumulation sums either way
  const Config chosen = resolve_auto_choices(with_stage(s.cfg, stage), s.qc.num_layers, world, [&](const Config& c) {
    return double(plan_rank_memory(c, s.qc, s.groups, world, 1, accum, s.device, s.baseline).total()) / double(mem);
  });
  Setup t = s;
  t.cfg = chosen;
  t.micro_tokens = chosen.batch.micro_tokens;
  t.micro = run_batch(t.cfg, world).micro;
  return plan_fixed_cell(t, stage, world, per_node, mem);
}

// The training split (data.train_files and data.train_sets, train_split.h) tokenized as training reads it
// (through the same cache, so the run that follows finds it), data.max_train_pairs applied, at the config's
// batch layout; an epoch is the first epoch's pairs under the training mix.
DataLengths data_lengths(const Config& cfg, data::Tokenizer& tok) {
  ZERO_REQUIRE(!cfg.data.train_files.empty() || !cfg.data.train_sets.empty(), ConfigError,
               "{}: no data.train_files or data.train_sets to count pairs from for the epoch time: give --dataset-pairs "
               "N", cfg.source);
  make_dir(cfg.data.cache_dir, "data.cache_dir");
  const TrainSplit split = load_train_split(cfg, [&](const std::vector<std::string>& files, const std::string&) {
    const data::DataConfig dc = data_config(cfg.data, files);
    return data::load_or_build_dataset(dc, tok, dataset_cache_file(cfg.data, dc, "train"), nullptr);
  });
  const data::PairDataset& ds = split.pairs;
  ZERO_REQUIRE(ds.num_pairs() > 0, ConfigError, "{}: the training split holds no pairs: give --dataset-pairs N", cfg.source);
  const std::vector<int64_t> epoch = data::epoch_pair_ids(split.mix, ds.num_pairs(), uint64_t(cfg.run.seed), 0);
  const data::BatchConfig bc = batch_config(cfg.data);
  DataLengths d;
  d.pairs = int64_t(epoch.size());
  double tokens = 0, answers = 0, scores = 0;
  auto causal = [](double n) { return n * (n + 1) / 2; };
  for (const int64_t p : epoch) {
    const double c = double(ds.seq_len(2 * p)), r = double(ds.seq_len(2 * p + 1));
    const double shared = double(data::shared_prompt(ds, p, bc));
    tokens += c + r - shared;
    answers += c + r;
    scores += shared > 0 ? causal(c + r - shared) : causal(c) + causal(r);
  }
  d.tokens_per_pair = tokens / double(d.pairs);
  d.scores_per_pair = scores / double(d.pairs);
  d.shared = 1.0 - tokens / answers;
  return d;
}

std::string mem_label(const Setup& s, const Cell& c) {
  return s.device == PlanDevice::Gpu ? fmt::format("{} x {}", c.world, format_bytes(double(c.mem)))
                                     : fmt::format("{} ranks ({} per node)", c.world, c.per_node);
}

// The fastest plan that fits among a (world, memory)'s stages (by the epoch: the data's own lengths where
// known); ties go to the lower stage.
const Cell* best_of(const std::vector<Cell>& cells, int world, size_t mem) {
  const Cell* best = nullptr;
  for (const Cell& c : cells)
    if (c.world == world && c.mem == mem && c.fits && (!best || c.epoch_s < best->epoch_s * 0.999)) best = &c;
  return best;
}

// Under full checkpointing: the most layers model.selective_layers can make selective in plan b (its stage
// and micro-batch, within its memory; the peak grows with them), and that plan's epoch time and peak.
std::string selective_advice(const Setup& s, const Cell& b, int per_node) {
  if (s.cfg.model.checkpointing_auto || s.cfg.model.activation_checkpointing != model::ActivationCheckpointing::Full ||
      s.cfg.model.selective_layers > 0)
    return "";
  Setup t = s;
  Cell best;
  int64_t lo = 0, hi = s.qc.num_layers;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    t.cfg.model.selective_layers = mid;
    const Cell c = plan_cell(t, b.stage, b.world, per_node, b.mem);
    if (c.fits && c.micro == b.micro) {
      lo = mid, best = c;
    } else {
      hi = mid - 1;
    }
  }
  if (lo == 0) return "";
  const std::string knob = lo == s.qc.num_layers ? std::string("model.activation_checkpointing=selective")
                                                 : fmt::format("model.selective_layers={}", lo);
  return fmt::format("; with {} (fewer GEMMs recomputed) ~{}/epoch, peak {}", knob, time_text(best.epoch_s),
                     format_bytes(double(best.m.total())));
}

// With the data's lengths known: a token budget for plan b's stage and memory (k pairs at max_len: the worst
// case a budget's memory is planned for), when its epoch beats b's: pair batches' or another budget's. Short
// pairs (hh-rlhf: ~5% of 2 x max_len) then fill a few large micro-steps instead of many small ones, whose
// per-micro-step work (the gradient accumulation passes, stage 3's gathers, small GEMMs) dominates. Of the
// budgets that fit, the smallest within 1% of the fastest: a larger one buys no speed for its memory.
std::string token_budget_advice(const Setup& s, const Cell& b, int per_node) {
  if (s.data.pairs == 0 || s.cfg.batch.micro_tokens_auto) return "";  // auto chose the budget already
  const int64_t per_rank = s.global / b.world, pair_tokens = 2 * s.cfg.data.max_len;
  Setup t = s;
  t.cfg.batch.micro = 0, t.cfg.batch.accum = 0;
  std::vector<std::pair<int64_t, Cell>> fits;  // (budget, plan), largest budget first
  for (int64_t k = per_rank; k >= 1; --k) {
    t.micro_tokens = t.cfg.batch.micro_tokens = k * pair_tokens;
    t.micro = k;
    Cell c = plan_cell(t, b.stage, b.world, per_node, b.mem);
    if (c.fits) fits.emplace_back(t.micro_tokens, std::move(c));
  }
  if (fits.empty()) return "";
  double fastest = fits.front().second.epoch_s;
  for (const auto& f : fits) fastest = std::min(fastest, f.second.epoch_s);
  const auto pick = std::find_if(fits.rbegin(), fits.rend(), [&](const auto& f) { return f.second.epoch_s <= fastest * 1.01; });
  if (pick->first == b.micro_tokens || pick->second.epoch_s >= b.epoch_s * 0.97) return "";
  return fmt::format("; with batch.micro_tokens={}{} ~{}/epoch, peak {}", pick->first,
                     b.micro_tokens > 0 ? "" : " (micro-batches by tokens, micro 0)", time_text(pick->second.epoch_s),
                     format_bytes(double(pick->second.m.total())));
}

// Across nodes without hybrid sharding: the fastest stage with a shard group per node (zero.shard_ranks node: its
// ranks), when its epoch beats plan b's: stage 3's gathers and the reductions then stay on the node's links, and
// one all-reduce of a shard a step crosses the network.
std::string hybrid_advice(const Setup& s, const Cell& b) {
  if (b.nodes == 1 || s.cfg.zero.shard_ranks != 0 || b.world % b.per_node != 0) return "";
  Setup t = s;
  t.cfg.zero.shard_ranks = ZeroSection::kShardRanksNode;
  t.cfg.zero.shard_ranks_node = true;
  std::optional<Cell> best;
  for (int stage = 1; stage <= 3; ++stage) {
    Cell c = plan_cell(t, stage, b.world, b.per_node, b.mem);
    if (c.fits && (!best || c.epoch_s < best->epoch_s)) best = std::move(c);
  }
  if (!best || best->epoch_s >= b.epoch_s * 0.97) return "";
  return fmt::format("; with zero.shard_ranks=node (hybrid sharding: each node's {} ranks shard, the nodes replicate) "
                     "at stage {} ~{}/epoch, peak {}",
                     b.per_node, best->stage, time_text(best->epoch_s), format_bytes(double(best->m.total())));
}

// Gradients on an fp32 wire over more than one rank: plan b with zero.reduce_dtype bf16 (every reduction, inside
// the shard group and across groups, in half the bytes; each sum rounded to bf16), when its epoch beats b's.
// Not under zero.world_invariant, whose sums are fixed point.
std::string wire_advice(const Setup& s, const Cell& b) {
  if (b.world == 1 || s.cfg.zero.reduce_dtype != DType::F32 || s.cfg.zero.world_invariant) return "";
  Setup t = s;
  t.cfg.zero.reduce_dtype = DType::BF16;
  const Cell c = plan_cell(t, b.stage, b.world, b.per_node, b.mem);
  if (!c.fits || c.epoch_s >= b.epoch_s * 0.97) return "";
  return fmt::format("; with zero.reduce_dtype=bf16 (gradients on the wire in bf16, half the bytes) ~{}/epoch",
                     time_text(c.epoch_s));
}

std::string recommendation(const Setup& s, const std::vector<Cell>& cells, int world, size_t mem, int per_node) {
  const Cell* b = best_of(cells, world, mem);
  const Cell* any = nullptr;
  for (const Cell& c : cells)
    if (c.world == world && c.mem == mem) any = &c;
  const std::string who = mem_label(s, *any);
  const std::string ckpt = b && s.cfg.model.checkpointing_auto ? ", checkpointing " + b->checkpointing : "";
  if (b && b->micro_tokens > 0)
    return fmt::format("{}: stage {}, micro_tokens {}{} ({} pairs at max_len), at most {} micro-steps{}, ~{}/epoch (peak {} "
                       "of {} per rank){}{}{}",
                       who, b->stage, s.cfg.batch.micro_tokens_auto ? "auto: " : "", b->micro_tokens, b->micro, b->accum,
                       ckpt, time_text(b->epoch_s),
                       format_bytes(double(b->m.total())), format_bytes(double(b->mem)), token_budget_advice(s, *b, per_node),
                       hybrid_advice(s, *b), wire_advice(s, *b));
  if (b)
    return fmt::format("{}: stage {}, micro {}, accum {}{}, ~{}/epoch (peak {} of {} per rank){}{}{}{}", who, b->stage,
                       b->micro, b->accum, ckpt, time_text(b->epoch_s), format_bytes(double(b->m.total())),
                       format_bytes(double(b->mem)), selective_advice(s, *b, per_node), token_budget_advice(s, *b, per_node),
                       hybrid_advice(s, *b), wire_advice(s, *b));
  // Nothing fits: what would, at stage 3 and micro 1.
  const Cell s3 = plan_cell(s, 3, world, per_node, mem);
  std::string more = "no world size up to 4096";
  for (int w = world * 2; w <= 4096; w *= 2) {
    if (s.global % w) continue;
    if (plan_cell(s, 3, w, per_node, mem).fits) {
      more = s.device == PlanDevice::Gpu ? fmt::format("stage 3 and {} GPUs of {}", w, format_bytes(double(mem)))
                                         : fmt::format("stage 3 and {} ranks", w);
      break;
    }
  }
  std::string bigger;
  if (s.device == PlanDevice::Gpu) {
    for (int gib : {24, 32, 40, 48, 80, 96, 141, 192})
      if (size_t(gib) << 30 > mem && plan_cell(s, 3, world, per_node, size_t(gib) << 30).fits) {
        bigger = fmt::format(", or {} GPU{} of {} GiB", world, world == 1 ? "" : "s", gib);
        break;
      }
  }
  if (s3.micro_tokens > 0)  // a budget is planned for at least one pair at max_len: smaller than that saves nothing
    return fmt::format("{}: fits at no stage (stage 3 with micro_tokens {} needs {} per rank); needs {}{}{}", who,
                       s3.micro_tokens, format_bytes(double(s3.m.total())),
                       s3.micro_tokens > token_budget_floor(s.cfg.data) ? "a smaller batch.micro_tokens, " : "", more,
                       bigger);
  return fmt::format("{}: fits at no stage (stage 3, micro 1 needs {} per rank); needs {}{}", who,
                     format_bytes(double(s3.m.total())), more, bigger);
}

void print_table(const Setup& s, const std::vector<Cell>& cells) {
  // comm: the step's collectives the compute does not hide, of all of them (the same on the CPU: none hidden).
  printf("%-5s %-6s %-9s %9s %9s %9s %9s %9s %9s %9s %9s %-4s %5s %5s %10s %15s %9s %9s\n", "stage", "ranks", "mem/rank",
         "params", "grads", "optim", "commbuf", "gathered", "activ", "runtime", "peak", "fits", "micro", "accum",
         "wire/step", "comm exp/all", "step", "epoch");
  // Under activation_checkpointing auto each cell's choice follows its row.
  const bool chosen = s.cfg.model.checkpointing_auto;
  for (const Cell& c : cells) {
    const MemoryPlan& m = c.m;
    printf("%-5d %-6d %-9s %9s %9s %9s %9s %9s %9s %9s %9s %-4s %5lld %5lld %10s %15s %9s %9s\n", c.stage, c.world,
           format_bytes(double(c.mem)).c_str(), format_bytes(double(m.params)).c_str(), format_bytes(double(m.grads)).c_str(),
           format_bytes(double(m.optimizer)).c_str(), format_bytes(double(m.comm_buffers)).c_str(),
           format_bytes(double(m.gathered)).c_str(), format_bytes(double(m.activations)).c_str(),
           format_bytes(double(m.runtime)).c_str(), format_bytes(double(m.total())).c_str(), c.fits ? "yes" : "no",
           (long long)c.micro, (long long)c.accum, format_bytes(c.traffic.wire_bytes + c.traffic.replica_wire_bytes).c_str(),
           fmt::format("{}/{}", time_text(c.exposed_comm_s), time_text(c.comm_s)).c_str(), time_text(c.step_s).c_str(),
           time_text(c.epoch_s).c_str());
    if (chosen) printf("      checkpointing %s\n", c.checkpointing.c_str());
    if (s.cfg.batch.micro_tokens_auto) printf("      micro_tokens auto: %lld\n", (long long)c.micro_tokens);
  }
}

nlohmann::json cell_json(const Cell& c) {
  const MemoryPlan& m = c.m;
  return {{"stage", c.stage},
          {"world", c.world},
          {"nodes", c.nodes},
          {"ranks_per_node", c.per_node},
          {"mem_per_rank_bytes", c.mem},
          {"components_bytes",
           {{"params", m.params}, {"grads", m.grads}, {"optimizer", m.optimizer}, {"comm_buffers", m.comm_buffers},
            {"gathered", m.gathered}, {"activations", m.activations}, {"runtime", m.runtime}}},
          {"peak_per_rank_bytes", m.total()},
          {"fits", c.fits},
          {"micro", c.micro},
          {"accum", c.accum},
          {"wire_bytes_per_step", c.traffic.wire_bytes},
          {"replica_wire_bytes_per_step", c.traffic.replica_wire_bytes},  // hybrid sharding: across the groups
          {"link", c.link},
          {"step_seconds", c.step_s},
          {"compute_seconds", c.compute_s},
          {"elementwise_seconds", c.elementwise_s},
          {"comm_seconds", c.comm_s},
          {"exposed_comm_seconds", c.exposed_comm_s},
          {"data_step_seconds", c.data_step_s},
          {"data_compute_seconds", c.data_compute_s},
          {"data_elementwise_seconds", c.data_elementwise_s},
          {"data_comm_seconds", c.data_comm_s},
          {"data_exposed_comm_seconds", c.data_exposed_comm_s},
          {"epoch_seconds", c.epoch_s},
          {"activation_checkpointing", c.checkpointing},
          {"micro_tokens", c.micro_tokens},
          {"rank_threads", c.threads}};
}

// Seconds before an sbatch job's time limit at which its ranks are told to stop: the step under way, a
// checkpoint of the largest presets and Slurm's signal coming up to 60 s early fit in it.
constexpr int kSbatchStopBeforeLimitS = 300;

void write_sbatch(const PlanArgs& a, const Setup& s, const Cell& c) {
  ZERO_REQUIRE(a.launcher == "srun" || a.launcher == "mpirun", ConfigError, "--launcher is srun or mpirun, not '{}'",
               a.launcher);
  const bool gpu = s.device == PlanDevice::Gpu;
  // Wall time: the run's epochs at the predicted speed, with half again and 15 minutes for startup,
  // evaluation and checkpoints, rounded up to the minute.
  const double secs = double(s.cfg.run.epochs) * c.epoch_s * 1.5 + 900;
  const long mins = long(std::ceil(secs / 60));
  // Host memory per node: the CPU plan's ranks x peak, +20%; a GPU job's host side is its processes and what
  // they stage there (plan_memory with backend cuda: a checkpoint's copy, an offloaded optimizer), +20%, at
  // least 16 GiB a rank (the data, NCCL's and CUDA's host buffers, assumed).
  double node_mem = double(c.per_node) * double(c.m.total()) * 1.2;
  if (gpu) {
    Config host_cfg = with_stage(s.cfg, c.stage);
    host_cfg.backend = Backend::Cuda;
    resolve_shard_ranks(host_cfg, c.per_node);
    const double host = double(plan_memory(host_cfg, s.qc, s.groups, c.world, c.per_node, c.micro, c.accum).total());
    node_mem = double(c.per_node) * std::max(16.0 * double(1ull << 30), host * 1.2);
  }
  const long mem_gib = std::max(1L, long(std::ceil(node_mem / double(1ull << 30))));
  const std::string stem = std::filesystem::path(s.cfg.source).stem().string();
  // The config as given on the command line (relative to where the job is submitted) with the plan's own --set
  // overrides (single-quoted for the shell), then the plan as --set (a later --set of a key wins). A token budget
  // stays the config's (batch.micro must then stay 0).
  std::string sets;
  for (const std::string& o : a.overrides) {
    std::string quoted;
    for (char ch : o) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    sets += fmt::format("--set '{}' ", quoted);
  }
  sets += fmt::format("--set zero.stage={} --set batch.global={}{} --set batch.world={}", c.stage, s.global,
                      s.micro_tokens > 0 ? "" : fmt::format(" --set batch.micro={}", c.micro), c.world);
  std::ofstream out(a.sbatch);
  ZERO_REQUIRE(out.good(), ConfigError, "--sbatch {}: cannot write", a.sbatch);
  out << "#!/usr/bin/env bash\n"
      << (c.micro_tokens > 0
              ? fmt::format("# Generated by `pmtrain plan` for {}: stage {}, micro_tokens {}{} (at most {} micro-steps) x {} "
                            "ranks, {} pairs per step;\n",
                            s.cfg.source, c.stage, s.cfg.batch.micro_tokens_auto ? "auto: " : "", c.micro_tokens, c.accum,
                            c.world, s.global)
              : fmt::format("# Generated by `pmtrain plan` for {}: stage {}, micro {} x accum {} x {} ranks = {} pairs per "
                            "step;\n",
                            s.cfg.source, c.stage, c.micro, c.accum, c.world, s.global))
      << fmt::format("# predicted peak {} per rank of {}, step {} at max_len, epoch {}{} ({}).\n",
                     format_bytes(double(c.m.total())), format_bytes(double(c.mem)), time_text(c.step_s),
                     time_text(c.epoch_s), c.data_step_s > 0 ? " at the data's own lengths" : " at max_len",
                     s.prof.source)
      << "#SBATCH --job-name=pmtrain-" << stem << "\n"
      << "#SBATCH --nodes=" << c.nodes << "\n"
      << "#SBATCH --ntasks-per-node=" << c.per_node << "\n";
  if (gpu) out << "#SBATCH --gpus-per-node=" << c.per_node << "\n";
  out << "#SBATCH --cpus-per-task=" << c.threads << "\n"
      << "#SBATCH --mem=" << mem_gib << "G\n"
      << fmt::format("#SBATCH --time={:02d}:{:02d}:00\n", mins / 60, mins % 60)
      // The time limit: the job's steps (the ranks, not this shell) get SIGTERM this long before it, save a
      // checkpoint and exit with kExitStopped; below, the job then requeues itself and resumes there.
      << fmt::format("#SBATCH --signal=TERM@{}\n", kSbatchStopBeforeLimitS)
      << "#SBATCH --requeue\n"
      << "#SBATCH --open-mode=append\n"
      << "#SBATCH --output=runs/slurm-%j.out\n"
      << "set -euo pipefail\n"
      << "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}\n"
      << "PMTRAIN=${PMTRAIN:-build/pmtrain/pmtrain}\n"
      << "# A requeued job (time limit, preemption, node failure) continues from its newest checkpoint; a new\n"
      << "# submission into a run.dir with checkpoints is refused as ever (pass --resume auto to continue one).\n"
      << "RESUME=\"\"\n"
      << "if [ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ]; then RESUME=\"--resume auto\"; fi\n"
      << "set +e\n";
  // Ranks in blocks of consecutive ranks a node, as the plan (and zero.shard_ranks node) assumes, whatever a site's
  // SLURM_DISTRIBUTION or Open MPI ranking policy (rmaps_base_ranking_policy: node would deal them round-robin) says.
  if (a.launcher == "srun")
    out << fmt::format("srun --mpi=pmix --distribution=block \"$PMTRAIN\" train {} {} $RESUME \"$@\"\n", a.config_path,
                       sets);
  else
    out << fmt::format("mpirun -np {} --map-by ppr:{}:node --rank-by slot \"$PMTRAIN\" train {} {} $RESUME \"$@\"\n",
                       c.world, c.per_node, a.config_path, sets);
  out << "rc=$?\n"
      << fmt::format("# {}: every rank stopped on a signal after saving a checkpoint: run the rest as this job again.\n",
                     kExitStopped)
      << fmt::format("if [ $rc -eq {} ] && [ -n \"${{SLURM_JOB_ID:-}}\" ]; then\n", kExitStopped)
      << "  echo \"pmtrain: stopped on a signal after saving; requeueing job $SLURM_JOB_ID to resume\"\n"
      << "  scontrol requeue \"$SLURM_JOB_ID\"\n"
      << "fi\n"
      << "exit $rc\n";
  ZERO_REQUIRE(out.good(), ConfigError, "--sbatch {}: write failed", a.sbatch);
}

}  // namespace

int run_plan(const PlanArgs& a) {
  Setup s;
  s.cfg = load_resolved_config({a.config_path, a.overrides});
  const Config& cfg = s.cfg;
  const bool gpu = model_device(cfg) == PlanDevice::Gpu || !a.gpu_mem.empty();
  s.device = gpu ? PlanDevice::Gpu : PlanDevice::Cpu;
  const std::vector<int> worlds =
      a.worlds.empty() ? std::vector<int>{cfg.batch.world > 0 ? int(cfg.batch.world) : 1} : parse_int_list(a.worlds, "--world");
  std::vector<size_t> mems;
  if (gpu) {
    for (const std::string& t : std::vector<std::string>{"24GiB", "40GiB", "80GiB"})
      if (a.gpu_mem.empty()) mems.push_back(parse_size(t, "--gpu-mem"));
    if (!a.gpu_mem.empty()) {
      size_t pos = 0;
      while (pos <= a.gpu_mem.size()) {
        const size_t comma = std::min(a.gpu_mem.find(',', pos), a.gpu_mem.size());
        mems.push_back(parse_size(a.gpu_mem.substr(pos, comma - pos), "--gpu-mem"));
        pos = comma + 1;
      }
    }
  }
  s.global = a.global_batch > 0 ? a.global_batch : cfg.batch.global;
  ZERO_REQUIRE(s.global > 0, ConfigError, "{}: no global batch: set batch.global or give --global-batch N", cfg.source);
  for (int w : worlds) {
    const int64_t lo = s.global / w * w, hi = lo + w;
    ZERO_REQUIRE(s.global % w == 0, ConfigError,
                 "--global-batch {} cannot be split evenly over {} ranks (micro x accum x {} ranks): use {}{}", s.global,
                 w, w, lo > 0 ? fmt::format("{} or ", lo) : "", hi);
  }
  s.micro = a.micro;
  s.micro_tokens = cfg.batch.micro_tokens;
  if (s.micro_tokens > 0) {
    ZERO_REQUIRE(a.micro == 0, ConfigError,
                 "--micro {}: {} sets micro-batches by tokens (batch.micro_tokens {}); drop --micro, or plan pair batches "
                 "with --set batch.micro_tokens=0",
                 a.micro, cfg.source, cfg.batch.micro_tokens_auto ? std::string("auto") : std::to_string(s.micro_tokens));
    s.micro = run_batch(cfg, worlds[0]).micro;  // the pairs of max_len tokens a budget holds (engine_assembly.h)
  }
  // zero.world_invariant: a micro-batch must hold the same pairs at every world size, so the plan keeps the
  // config's batch.micro rather than searching one per cell.
  const bool kept_micro = cfg.zero.world_invariant && a.micro == 0 && s.micro_tokens == 0 && cfg.batch.micro > 0;
  if (kept_micro) s.micro = cfg.batch.micro;
  for (int w : worlds)
    ZERO_REQUIRE(s.micro == 0 || s.micro_tokens > 0 || (s.global / w) % s.micro == 0, ConfigError,
                 "{} {}: {} pairs per rank per step ({} over {} ranks) are not a whole number of micro-batches",
                 kept_micro ? "batch.micro (kept: zero.world_invariant)" : "--micro", s.micro, s.global / w, s.global, w);
  if (!a.sbatch.empty())
    ZERO_REQUIRE(worlds.size() == 1 && mems.size() <= 1, ConfigError,
                 "--sbatch writes one job: give one --world and (for GPUs) one --gpu-mem");
  s.prof = a.profile.empty() ? assumed_profile(gpu) : load_profile(a.profile);
  ZERO_REQUIRE(s.prof.device == (gpu ? "gpu" : "cpu"), ConfigError,
               "--profile {} was measured on the {}, but {} runs on {}; measure this backend with `pmtrain calibrate {} "
               "--out FILE` where it runs",
               a.profile, s.prof.device == "gpu" ? "GPU" : "CPU", cfg.source, gpu ? "GPUs (backend cuda)" : "the CPU",
               cfg.source);
  if (s.prof.process_baseline_bytes > 0) s.baseline = size_t(s.prof.process_baseline_bytes);
  s.intra_name = a.intra_link;
  if (!a.intra_link.empty()) find_link(a.intra_link);  // a bad name is an error even for a CPU plan
  s.inter = find_link(a.inter_link);

  auto tok = data::Tokenizer::from_file(cfg.data.tokenizer);
  if (a.dataset_pairs > 0) {
    s.pairs = a.dataset_pairs;
  } else {
    s.data = data_lengths(cfg, tok);
    s.pairs = s.data.pairs;
  }
  s.qc = resolve_model_config(cfg.model, tok.vocab_size());
  const model::Qwen3RewardModel model(s.qc, reward_model_options(cfg));
  s.groups = engine_groups(model.groups());

  std::vector<Cell> cells;
  struct Combo {
    int world;
    size_t mem;
    int per_node;
  };
  std::vector<Combo> combos;
  for (int w : worlds) {
    const int per_node = a.ranks_per_node > 0 ? a.ranks_per_node : (gpu ? std::min(w, 8) : w);
    if (gpu) {
      for (size_t m : mems) combos.push_back({w, m, per_node});
    } else {
      combos.push_back({w, host_memory_bytes() / 10 * 9 / size_t(std::min(per_node, w)), per_node});
    }
  }
  for (const Combo& k : combos)
    for (int stage = 0; stage <= 3; ++stage) cells.push_back(plan_cell(s, stage, k.world, k.per_node, k.mem));

  std::vector<std::string> recs;
  bool any_fits = false;
  for (const Combo& k : combos) {
    recs.push_back(recommendation(s, cells, k.world, k.mem, k.per_node));
    any_fits = any_fits || best_of(cells, k.world, k.mem) != nullptr;
  }
  const double numel = double(make_partition(s.groups, 1, 1 << 20).total_numel);
  const std::string params = numel >= 1e9 ? fmt::format("{:.2f}B", numel / 1e9) : fmt::format("{:.1f}M", numel / 1e6);
  if (a.json) {
    nlohmann::json j = {{"config", cfg.source},
                        {"parameters", make_partition(s.groups, 1, 1 << 20).total_numel},
                        {"device", gpu ? "gpu" : "cpu"},
                        {"global_batch", s.global},
                        {"dataset_pairs", s.pairs},
                        {"data_tokens_per_pair", s.data.tokens_per_pair},
                        {"data_shared_prompt_share", s.data.shared},
                        {"max_len", cfg.data.max_len},
                        {"micro_tokens", s.cfg.batch.micro_tokens_auto ? nlohmann::json("auto") : nlohmann::json(s.micro_tokens)},
                        {"activation_checkpointing", cfg.model.checkpointing_auto ? std::string("auto") : checkpointing_text(cfg.model, s.qc.num_layers)},
                        {"profile", s.prof.to_json()},
                        {"inter_node_link_assumed", s.inter.what},
                        {"cells", nlohmann::json::array()},
                        {"recommendations", recs}};
    for (const Cell& c : cells) j["cells"].push_back(cell_json(c));
    printf("%s\n", j.dump(2).c_str());
  } else {
    printf("%s: %s parameters, %s, global batch %lld, %lld pairs/epoch, sequences at data.max_len %lld (worst case), "
           "activation checkpointing %s\n",
           cfg.source.c_str(), params.c_str(), gpu ? "GPUs (backend cuda)" : "CPU ranks (host memory)",
           (long long)s.global, (long long)s.pairs, (long long)cfg.data.max_len,
           (cfg.model.checkpointing_auto ? std::string("auto (chosen per cell)") : checkpointing_text(cfg.model, s.qc.num_layers)).c_str());
    if (s.data.pairs > 0)
      printf("epoch at the training data's own lengths: %.1f tokens computed a pair (%.0f%% of 2 x max_len%s); "
             "memory and step at max_len\n",
             s.data.tokens_per_pair, 100.0 * s.data.tokens_per_pair / (2.0 * double(cfg.data.max_len)),
             s.data.shared > 0 ? fmt::format("; shared prompts save {:.0f}% of the answers' tokens", 100.0 * s.data.shared).c_str()
                               : "");
    else
      printf("epoch at max_len (--dataset-pairs: the data is not read)\n");
    std::string measured;  // the world sizes whose collectives the profile measured
    for (const auto& [w, r] : s.prof.collectives) measured += (measured.empty() ? "" : ", ") + std::to_string(w);
    const std::string links =
        gpu ? fmt::format("within a node {}, between nodes {} (assumed; per cell in --json)",
                          a.intra_link.empty() ? "NVLink (H100) for 80 GiB GPUs, else PCIe 4 x16" : s.intra(0).what,
                          s.inter.what)
            : "MPI over shared memory at half the profile's element-wise speed";
    // A CPU rank's threads (cpu_rank_threads) and how they price its compute (cpu_rank_speed).
    const std::string threads =
        gpu ? ""
            : fmt::format(", a rank's at that x its math threads / {} (assumed linear), its threads: {}", s.prof.threads,
                          cfg.threads_from == ThreadsFrom::Default
                              ? fmt::format("its share of the profile's {} cores (rank_threads in --json)", s.prof.cores)
                              : fmt::format("{} ({})", cfg.threads,
                                            cfg.threads_from == ThreadsFrom::OmpNumThreads ? "OMP_NUM_THREADS" : "the config's"));
    printf("speeds: compute %s%s; links %s%s%s\n", s.prof.source.c_str(), threads.c_str(), links.c_str(),
           measured.empty() ? "" : fmt::format("; collectives measured at {} rank(s) on one node", measured).c_str(),
           gpu ? "; GPU runtime: 1 GiB CUDA context + 5% pool slack (assumed); collectives hidden behind the compute "
                 "of the pass that issues them, as far as it lasts (assumed)"
               : "");
    int64_t most_threads = 0;  // a CPU rank's, the most in the grid
    for (const Cell& c : cells) most_threads = std::max(most_threads, gpu ? 0 : c.threads);
    if (most_threads > s.prof.threads)
      printf("note: ranks of %lld threads: the profile's speed for %d scaled up linearly, optimistic where they take every "
             "core (2 threads ran 1.5-1.7x as fast as 1 on a 2-core machine); to measure it: pmtrain calibrate --threads %lld\n",
             (long long)most_threads, s.prof.threads, (long long)most_threads);
    if (s.cfg.batch.micro_tokens_auto)
      printf("micro-batches by tokens: batch.micro_tokens auto, the most whose plan fits each cell's memory (below each "
             "row; micro: the pairs at max_len it holds); accum below is the most micro-steps a step can take\n");
    else if (s.micro_tokens > 0)
      printf("micro-batches by tokens: batch.micro_tokens %lld holds %lld pairs at max_len; accum below is the most "
             "micro-steps a step can take\n",
             (long long)s.micro_tokens, (long long)s.micro);
    print_table(s, cells);
    for (const std::string& r : recs) printf("recommended: %s\n", r.c_str());
  }
  if (!a.sbatch.empty()) {
    const Cell* b = best_of(cells, combos[0].world, combos[0].mem);
    ZERO_REQUIRE(b, ConfigError, "--sbatch {}: nothing to write: {}", a.sbatch, recs[0]);
    write_sbatch(a, s, *b);
    fprintf(a.json ? stderr : stdout, "wrote %s\n", a.sbatch.c_str());
  }
  if (!any_fits) {
    fprintf(stderr, "pmtrain plan: the run fits nowhere in this grid: %s\n", recs.back().c_str());
    return 3;
  }
  return 0;
}

}  // namespace zero::pmtrain
