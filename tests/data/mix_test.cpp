// The training mix's epochs (data/mix.h) against counts worked by hand: a source of `count` pairs at weight
// q + f gives q copies of every pair and round(f * count) of its own shuffle's window, which moves on by that
// many each epoch.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "core/check.h"
#include "data/mix.h"

namespace zero::data {
namespace {

std::map<int64_t, int> counts(const std::vector<int64_t>& ids) {
  std::map<int64_t, int> c;
  for (int64_t id : ids) ++c[id];
  return c;
}

TEST(Mix, EpochSizesByHand) {
  const Mix mix = {{"a", 0, 10, 1.0}, {"b", 10, 5, 0.5}, {"c", 15, 4, 2.25}};
  EXPECT_EQ(epoch_pairs(mix[0]), 10);
  EXPECT_EQ(epoch_pairs(mix[1]), 3);  // round(2.5) = 3
  EXPECT_EQ(epoch_pairs(mix[2]), 9);  // 2 x 4 + round(0.25 x 4) = 9
  EXPECT_EQ(epoch_pairs(mix, 19), 22);
  EXPECT_EQ(epoch_pairs(Mix{}, 19), 19);
  for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(epoch_pair_ids(mix, 19, 7, e).size(), 22u) << e;
}

TEST(Mix, NoMixIsEveryPairOnceInOrder) {
  std::vector<int64_t> want(6);
  std::iota(want.begin(), want.end(), int64_t(0));
  EXPECT_EQ(epoch_pair_ids({}, 6, 99, 3), want);
  EXPECT_EQ(epoch_pair_ids({{"all", 0, 6, 1.0}}, 6, 99, 3), want);
}

TEST(Mix, WholeWeightsRepeatEveryPairThatManyTimes) {
  const Mix mix = {{"once", 0, 3, 1.0}, {"twice", 3, 4, 2.0}, {"thrice", 7, 2, 3.0}};
  const auto c = counts(epoch_pair_ids(mix, 9, 1, 0));
  for (int64_t id = 0; id < 9; ++id) EXPECT_EQ(c.at(id), id < 3 ? 1 : id < 7 ? 2 : 3) << id;
}

TEST(Mix, AHalfWeightTakesEveryPairOnceInTwoEpochs) {
  const Mix mix = {{"whole", 0, 4, 1.0}, {"half", 4, 10, 0.5}};
  std::map<int64_t, int> two;
  for (int64_t e : {0, 1}) {
    const std::vector<int64_t> ids = epoch_pair_ids(mix, 14, 5, e);
    ASSERT_EQ(ids.size(), 9u);
    const auto c = counts(ids);
    for (int64_t id = 0; id < 4; ++id) EXPECT_EQ(c.at(id), 1);
    for (const auto& [id, n] : c) two[id] += n;
  }
  for (int64_t id = 4; id < 14; ++id) EXPECT_EQ(two[id], 1) << id;  // each half-weight pair once over the two
  EXPECT_EQ(epoch_pair_ids(mix, 14, 5, 2), epoch_pair_ids(mix, 14, 5, 0));  // and round again
  EXPECT_NE(epoch_pair_ids(mix, 14, 5, 0), epoch_pair_ids(mix, 14, 6, 0));  // the window follows the seed
}

TEST(Mix, AWindowWrapsAroundTheSource) {
  // 5 pairs at 0.6: 3 an epoch; epochs 0-4 take 15 = 3 x 5 pairs: every pair exactly 3 times.
  const Mix mix = {{"s", 0, 5, 0.6}};
  std::map<int64_t, int> c;
  for (int64_t e = 0; e < 5; ++e)
    for (int64_t id : epoch_pair_ids(mix, 5, 11, e)) ++c[id];
  for (int64_t id = 0; id < 5; ++id) EXPECT_EQ(c[id], 3) << id;
}

TEST(Mix, BadSourcesAreNamed) {
  auto message = [](const Mix& mix, int64_t n) {
    try {
      check_mix(mix, n);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"helpful", 0, 10, 0.0}}, 10).find("'helpful' has weight 0"), std::string::npos);
  EXPECT_NE(message({{"helpful", 0, 10, -1.0}}, 10).find("weight -1"), std::string::npos);
  EXPECT_NE(message({{"h", 0, 10, std::nan("")}}, 10).find("weight nan"), std::string::npos);
  EXPECT_NE(message({{"tiny", 0, 10, 0.04}}, 10).find("'tiny' at weight 0.04 takes none of its 10 pairs"),
            std::string::npos);
  EXPECT_EQ(message({{"tiny", 0, 10, 0.05}}, 10), "no error");  // round(0.5) = 1 pair
  EXPECT_NE(message({{"past", 5, 10, 1.0}}, 10).find("'past'"), std::string::npos);
}

TEST(Mix, JsonKeepsTheNumbers) {
  const Mix mix = {{"a", 0, 10, 1.0}, {"b", 10, 5, 0.3}};
  const Mix back = mix_from_json(nlohmann::json::parse(mix_to_json(mix).dump()));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].first, 10);
  EXPECT_EQ(back[1].count, 5);
  EXPECT_EQ(back[1].weight, 0.3);
  EXPECT_TRUE(back[1].name.empty());
}

}  // namespace
}  // namespace zero::data
