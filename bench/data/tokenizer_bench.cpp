// Tokenizer throughput on one core: zero's C++ tokenizer and Hugging Face tokenizers (npm, Rust core)
// on the same texts in the same run, pinned to the same CPU, with a check that the ids are equal.
// Texts: every chosen and rejected transcript of the bundled hh-rlhf files (raw). MB = 1e6 bytes.
// usage: data_tokenizer_bench [--repeats N] [--cpu K] [--json OUT]
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/host_name.h"
#include "data/hh_rlhf.h"
#include "data/tokenizer.h"

using namespace zero::data;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
double best(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) out.clear();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5, cpu = 0;
  std::string json_out;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--cpu") && i + 1 < argc) cpu = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_out = argv[++i];
    else {
      std::fprintf(stderr, "usage: data_tokenizer_bench [--repeats N] [--cpu K] [--json OUT]\n");
      return 2;
    }
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const bool pinned = sched_setaffinity(0, sizeof set, &set) == 0;

  const std::string assets = ZERO_DATA_ASSETS;
  const std::string tok_path = assets + "/qwen3/tokenizer.json";
  const std::vector<std::string> files = {assets + "/hh-rlhf/harmless-base/train.jsonl.gz",
                                          assets + "/hh-rlhf/harmless-base/test.jsonl.gz"};
  std::vector<std::string> texts;
  ReadStats stats;
  read_hh_pairs(files, {}, stats, [&](PairText& p) {
    texts.push_back(std::move(p.chosen));
    texts.push_back(std::move(p.rejected));
  });
  size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();

  auto t_load = std::chrono::steady_clock::now();
  Tokenizer tok = Tokenizer::from_file(tok_path);
  const double load_s = seconds_since(t_load);

  std::vector<std::vector<int32_t>> ours(texts.size());
  std::vector<double> cold, warm;
  for (int r = 0; r < repeats; ++r) {
    tok.clear_cache();
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < texts.size(); ++i) {
      ours[i].clear();
      tok.encode_into(texts[i], ours[i]);
    }
    cold.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < texts.size(); ++i) {
      ours[i].clear();
      tok.encode_into(texts[i], ours[i]);
    }
    warm.push_back(seconds_since(t0));
  }
  size_t tokens = 0;
  for (const auto& v : ours) tokens += v.size();

  // HF side: same texts through a temp JSONL, node pinned to the same CPU, one rayon thread.
  const auto tmp = std::filesystem::temp_directory_path() / ("zero_tok_bench_" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  {
    std::ofstream f(tmp / "texts.jsonl");
    for (const auto& t : texts) f << nlohmann::json{{"text", t}}.dump() << "\n";
  }
  const std::string cmd = "cd '" + tmp.string() + "' && NODE_PATH='" + ZERO_NODE_MODULES +
                          "' TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 UV_THREADPOOL_SIZE=1 taskset -c " +
                          std::to_string(cpu) + " node '" + ZERO_HF_SCRIPT + "' '" + tok_path + "' texts.jsonl ids.jsonl " +
                          std::to_string(repeats);
  const std::string hf_out = run_capture(cmd);
  nlohmann::json hf;
  size_t mismatches = 0, compared = 0;
  if (!hf_out.empty()) {
    hf = nlohmann::json::parse(hf_out);
    std::ifstream f(tmp / "ids.jsonl");
    std::string line;
    for (size_t i = 0; std::getline(f, line) && i < ours.size(); ++i, ++compared)
      if (nlohmann::json::parse(line)["ids"].get<std::vector<int32_t>>() != ours[i]) ++mismatches;
  }
  std::filesystem::remove_all(tmp);

  const double mb = double(bytes) / 1e6;
  std::printf("# data_tokenizer_bench: Qwen3 tokenizer, one core (cpu %d%s), host %s, best of %d passes\n", cpu,
              pinned ? ", pinned" : ", NOT pinned", zero::host_name("?").c_str(), repeats);
  std::printf("# texts: %zu (hh-rlhf harmless-base train+test, chosen and rejected, raw), %.3f MB, %zu tokens\n",
              texts.size(), mb, tokens);
  std::printf("# cold = empty word cache (fresh HF tokenizer per pass), warm = second pass over the same texts\n");
  std::printf("# zero tokenizer.json load: %.3f s (not in the timings)\n", load_s);
  std::printf("%-40s %10s %10s %12s\n", "implementation / pass", "time_s", "MB/s", "tokens/s");
  auto row = [&](const std::string& name, double s) {
    std::printf("%-40s %10.4f %10.2f %12.0f\n", name.c_str(), s, mb / s, double(tokens) / s);
  };
  row("zero C++ cold", best(cold));
  row("zero C++ warm", best(warm));
  nlohmann::json j = {{"texts", texts.size()}, {"bytes", bytes}, {"tokens", tokens}, {"cpu", cpu},
                      {"zero_cold_s", best(cold)}, {"zero_warm_s", best(warm)}};
  if (!hf.is_null()) {
    const std::string v = hf["version"].get<std::string>();
    const double hb_cold = best(hf["batch_cold_s"].get<std::vector<double>>());
    const double hb_warm = best(hf["batch_warm_s"].get<std::vector<double>>());
    const double hs = best(hf["single_s"].get<std::vector<double>>());
    row("HF tokenizers " + v + " encodeBatch cold", hb_cold);
    row("HF tokenizers " + v + " encodeBatch warm", hb_warm);
    row("HF tokenizers " + v + " encode() per text", hs);
    std::printf("# ids equal to HF on %zu/%zu texts%s\n", compared - mismatches, texts.size(),
                mismatches == 0 && compared == texts.size() ? "" : "  <-- MISMATCH");
    std::printf("# speed-up zero/HF: cold %.2fx, warm %.2fx (vs encodeBatch)\n", hb_cold / best(cold),
                hb_warm / best(warm));
    j["hf"] = hf;
    j["ids_equal"] = mismatches == 0 && compared == texts.size();
  } else {
    std::printf("# HF tokenizers not run (install: bash launch/setup.d/20-node-tokenizers.sh)\n");
  }
  if (!json_out.empty()) std::ofstream(json_out) << j.dump(2) << "\n";
  return (!hf.is_null() && (mismatches || compared != texts.size())) ? 1 : 0;
}
