// The speeds the planner predicts step times from: a compute profile (GEMM FLOP/s and element-wise
// bytes/s of one rank, measured by `pmtrain calibrate` on the machine at hand and saved as a small JSON
// file, or a built-in one marked assumed) and a table of common interconnects (always assumed: nothing
// here measures a network).
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/bootstrap.h"
#include "model/qwen3_config.h"

namespace zero::pmtrain {

struct ComputeProfile {
  std::string source;              // "measured on HOST" or "assumed: ..."
  bool assumed = true;
  std::string device = "cpu";      // cpu | gpu
  double gemm_flops = 0;           // FLOP/s of one rank's GEMMs (CPU: `threads` threads)
  // The model's attention forward + backward in attention_flops()'s counting, per second (0: not measured;
  // the planner then prices attention at gemm_flops).
  double attention_flops = 0;
  double elementwise_bytes = 0;    // bytes/s read + written by memory-bound element-wise passes
  double adamw_elements = 0;       // elements/s of the optimizer step (0: elementwise_bytes over traffic::adamw)
  // Bytes/s of the engine's per-micro-step gradient work on a GPU: a gradient view's non-finite count and its add
  // into the fp32 accumulator, at zero/step_traffic.h's bytes (0: not measured, or a CPU profile: priced at
  // elementwise_bytes). These are the engine's own kernels (cuda/kernels.cu), not the model's: on 11-28 they ran at
  // about half the model's add + RMSNorm rate (bench/results/gpu_20261128_h200).
  double gradient_bytes = 0;
  // Elements/s of the model's SwiGLU forward and backward, priced apart from the bytes: on a CPU core its
  // exponentials make it ~15x slower than a memory pass over the same elements (0: not measured, not priced).
  double swiglu_forward_elements = 0, swiglu_backward_elements = 0;
  int threads = 1;                 // CPU: threads the GEMM was measured with
  int cores = 1;                   // CPU: cores of the node (ranks beyond them share)
  double process_baseline_bytes = 0;  // CPU: a rank's resident bytes before the model (0: the built-in one)
  // The engine's collectives through its communicator (MPI on the CPU, NCCL on GPUs), measured by `mpirun -np
  // W pmtrain calibrate` (and at 1 rank, where the communicator copies): elements a second of each kind in
  // comm_report()'s counting (an all-reduce counts twice its count), by world size. A world without an entry
  // falls back to the link model.
  struct CollectiveRates {
    double all_reduce = 0, reduce_scatter = 0, all_gather = 0;
  };
  std::map<int, CollectiveRates> collectives;
  // The model's linear layers at the calibrated config's projection shapes (in -> out features: q/k/v and
  // gate/up fused, o, down) at several token counts, FLOP/s of each of a layer's three GEMMs: the forward,
  // the input gradient and the weight gradient (on a CPU core the two backward ones ran at about half the
  // forward's rate; few tokens and narrow shapes run below gemm_flops, measured at one large square forward).
  // Empty: not measured (no config, or an older profile).
  enum class GemmPass : int { Forward = 0, InputGrad = 1, WeightGrad = 2 };
  struct GemmRate {
    int64_t tokens = 0, in = 0, out = 0;
    double flops[3] = {0, 0, 0};  // by GemmPass
  };
  std::vector<GemmRate> gemm_rates;

  nlohmann::json to_json() const;
  // FLOP/s of GEMM `pass` of a linear layer over `tokens` rows, in -> out: gemm_rates' entries of that shape
  // interpolated linearly in log tokens (the nearest one outside their range), else gemm_flops.
  double gemm_rate(double tokens, int64_t in, int64_t out, GemmPass pass) const;
};

// A decoder layer's projections as the GEMMs the model runs, in -> out features: q/k/v fused, o, gate/up
// fused, down (what calibrate measures and the planner prices, one list for both).
std::vector<std::pair<int64_t, int64_t>> projection_shapes(const model::Qwen3Config& q);

// Built-in profiles, marked assumed: an H100 SXM at 60% of its 989 TFLOP/s dense bf16 and 70% of
// 3.35 TB/s, attention and SwiGLU at our kernels' measured speed; a CPU core at 30 GFLOP/s and 8 GB/s.
ComputeProfile assumed_profile(bool gpu);
// Reads a profile written by `pmtrain calibrate`; ConfigError naming the file and key otherwise.
ComputeProfile load_profile(const std::string& path);
// An interconnect's sustained bandwidth per rank for ring collectives (bytes/s), from vendor figures.
struct Link {
  const char* name;
  const char* what;
  double bytes_per_s;
};
// pcie4, nvlink-h100, ib100, ib200, ib400; ConfigError listing them for another name.
const Link& find_link(const std::string& name);
std::string link_names();

struct CalibrateArgs {
  std::string config_path;             // empty: the CPU backend at the config defaults (fp32)
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string out;                     // empty: print only
  int threads = 0;                     // math threads per rank; 0: the config's `threads`
  bool quick = false;                  // --quick: each rate timed over kQuickTimeScale of its usual time
};
// --quick's share of each measurement's time: a rough profile (a plan's shape, a script's plumbing) in a
// tenth of the seconds, each rate the best of fewer calls.
inline constexpr double kQuickTimeScale = 0.1;
// Measures the backend a config runs on (`backend`, `zero.param_dtype`, `threads`) through the ops a
// training step runs, so one measurement serves both backends: GEMMs as the model's linear forward at a
// projection's shape, element-wise speed as the model's residual add and RMSNorm, SwiGLU forward and
// backward on their own, the engine's AdamW step, and the engine's collectives over its communicator (MPI
// on the CPU, NCCL on GPUs) at the world size it was started with (one process: the 1-rank copies). Every
// rank measures the collectives; rank 0 the rest. With --out naming an existing profile of the same device,
// its collective rates of other world sizes are kept, so one file can hold 1, 2 and 4 ranks.
int run_calibrate(const CalibrateArgs& a, MpiRuntime& mpi);

}  // namespace zero::pmtrain
