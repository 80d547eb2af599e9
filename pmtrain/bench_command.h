// `pmtrain bench CONFIG`: the throughput of the real training step on synthetic pairs. Seeded random
// token ids, every sequence exactly --seq tokens (no data file or tokenizer is read, except the tokenizer
// where the model takes its vocabulary size from it: preset tiny), go through what `pmtrain train` runs
// (the sampler over ranks, make_batch, train_step on the config's backend, stage and engine), from a random
// init. Per step and in a summary: the median step time of the steps after --warmup, tokens/s (every token is
// real), MFU (pmtrain/model_flops.h) against --peak-tflops (989 on cuda, an H100's dense bf16; on the CPU
// only when given), and the peak memory (CUDA: the engine's and the model's tracked peak bytes and the
// device's bytes in use; CPU: VmHWM). Under mpirun --pairs-per-step is the global batch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero {
class MpiRuntime;
}

namespace zero::pmtrain {

struct BenchArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  int64_t seq = 2048;        // tokens per sequence
  int64_t pairs = 2;         // pairs per optimizer step over all ranks (2 sequences each)
  int64_t steps = 10;        // steps run, warm-up included
  int64_t warmup = 2;        // first steps left out of the median
  double peak_tflops = 0;    // per rank; 0: kH100PeakTflops on cuda, no MFU on the CPU
  bool json = false;         // one JSON object on stdout instead of the lines
};

inline constexpr double kH100PeakTflops = 989.0;  // H100 SXM, dense bf16 (the MFU denominator)

int run_bench(const BenchArgs& a, MpiRuntime& mpi);

}  // namespace zero::pmtrain
