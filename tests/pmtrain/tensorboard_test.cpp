// pmtrain/tensorboard.h's pieces against references outside it: CRC-32C against RFC 3720's check values
// (appendix B.4) and the common "123456789" check value; the scalars of a metrics record against its numbers
// written out by hand. tensorboard.sh reads whole event files back with python3-protobuf and python3-crcmod.
#include "pmtrain/tensorboard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

namespace zero::pmtrain {
namespace {

TEST(Crc32c, MatchesRfc3720CheckValues) {
  std::vector<uint8_t> b(32, 0x00);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x8A9136AAu);
  std::fill(b.begin(), b.end(), 0xFF);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x62A8AB43u);
  std::iota(b.begin(), b.end(), 0);  // 0x00 .. 0x1F
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) b[i] = uint8_t(31 - i);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x113FDB5Cu);
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(RecordScalars, EveryNumberUnderItsTypeAndPath) {
  const auto r = nlohmann::json::parse(R"({"type": "train", "step": 7, "time": 1.5e9, "loss": 0.25, "pairs": 8,
      "applied": true, "weights": "step_6", "time_s": {"gemm": 0.5, "other": 0.125},
      "sets": {"b": {"loss": 0.75, "pairs": 3}}})");
  // nlohmann::json keeps an object's keys sorted; "applied" (a boolean) and "weights" (a string) are no scalars.
  const std::vector<std::pair<std::string, double>> want = {
      {"train/loss", 0.25}, {"train/pairs", 8}, {"train/sets/b/loss", 0.75}, {"train/sets/b/pairs", 3},
      {"train/time_s/gemm", 0.5}, {"train/time_s/other", 0.125}};
  const auto got = record_scalars(r);
  EXPECT_EQ(got, want);
}

// A diverged step's NaN or infinite loss is null in metrics.jsonl (nlohmann writes it so): no scalar either,
// live or rebuilt from the file.
TEST(RecordScalars, NoNonFinite) {
  nlohmann::json r = {{"type", "train"}, {"step", 2}, {"loss", std::nan("")}, {"grad_norm", HUGE_VAL}, {"lr", 1e30}};
  const std::vector<std::pair<std::string, double>> want = {{"train/lr", 1e30}};
  EXPECT_EQ(record_scalars(r), want);
  EXPECT_EQ(record_scalars(nlohmann::json::parse(r.dump())), want);
}

TEST(RecordScalars, NoneWithoutTypeOrStep) {
  EXPECT_TRUE(record_scalars(nlohmann::json::parse(R"({"type": "summary", "steps": 6, "seconds": 2.5})")).empty());
  EXPECT_TRUE(record_scalars(nlohmann::json::parse(R"({"step": 3, "loss": 0.5})")).empty());
  EXPECT_TRUE(record_scalars(nlohmann::json::parse(R"({"type": "resume", "step": 4, "world": 2, "load_s": 0.1})")).empty());
  EXPECT_TRUE(record_scalars(nlohmann::json::parse(R"({"type": "eval", "step": "3", "loss": 0.5})")).empty());
}

}  // namespace
}  // namespace zero::pmtrain
