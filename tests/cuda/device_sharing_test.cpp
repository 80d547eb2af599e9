// Device choice by identity: a Slurm task that sees one GPU (its own) is not sharing, whatever the
// count of ranks on the node; two ranks on the same UUID are.
#include <gtest/gtest.h>

#include "cuda/device_sharing.h"

using namespace zero;

TEST(DeviceSharing, SlurmGpusPerTaskIsNotSharedThoughEveryTaskSeesDevice0) {
  // 8 tasks, each with CUDA_VISIBLE_DEVICES set to its own GPU: each sees 1 device and picks index 0.
  std::vector<std::string> uuids;
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(device_for_local_rank(r, 1), 0);
    uuids.push_back("GPU-000" + std::to_string(r));
  }
  EXPECT_FALSE(any_gpu_shared(uuids));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(ranks_on_same_gpu(uuids, r), 1);
}

TEST(DeviceSharing, AllGpusVisibleRanksPickModuloAndShareOnlyWhenMoreRanksThanGpus) {
  const std::vector<std::string> gpus = {"a", "b", "c", "d"};
  std::vector<std::string> four, six;
  for (int r = 0; r < 4; ++r) four.push_back(gpus[device_for_local_rank(r, 4)]);
  for (int r = 0; r < 6; ++r) six.push_back(gpus[device_for_local_rank(r, 4)]);
  EXPECT_EQ(four, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_FALSE(any_gpu_shared(four));
  EXPECT_EQ(six[4], "a");
  EXPECT_TRUE(any_gpu_shared(six));
  // 6 ranks on 4 GPUs: a and b hold two ranks' plans each, c and d one.
  const int expected[6] = {2, 2, 1, 1, 2, 2};
  for (int r = 0; r < 6; ++r) EXPECT_EQ(ranks_on_same_gpu(six, r), expected[r]) << "local rank " << r;
  EXPECT_EQ(ranks_on_same_gpu(four, 3), 1);
}

TEST(DeviceSharing, TwoRanksOnOneGpuAreShared) {
  EXPECT_EQ(device_for_local_rank(1, 1), 0);
  EXPECT_TRUE(any_gpu_shared({"GPU-x", "GPU-x"}));
  EXPECT_FALSE(any_gpu_shared({"GPU-x"}));
}
