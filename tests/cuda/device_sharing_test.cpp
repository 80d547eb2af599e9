// Device choice by identity: a Slurm task that sees one GPU (its own) is not sharing, whatever the
// count of ranks on the node; two ranks on the same UUID are.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cuda/device_select.h"
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

// Ranks sharing a GPU become NCCL hosts of their own; on one node they talk over loopback (the H200 machine's
// 2-rank NCCL test hung in set-up when NCCL chose the network itself). What the user set is kept, and a job
// over several nodes gets no loopback (its ranks on other nodes could not be reached through it).
namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "(unset)";
}
void clear_nccl_env() {
  for (const char* n : {"NCCL_HOSTID", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE"}) unsetenv(n);
}
}  // namespace

TEST(SharedGpuIsolation, OneNodeTalksOverLoopbackUnlessTheUserChose) {
  clear_nccl_env();
  DeviceChoice dev;
  dev.shared = true;
  dev.one_node = true;
  isolate_ranks_for_shared_gpu(dev, 3);
  EXPECT_EQ(env("NCCL_HOSTID"), "fakehost3");
  EXPECT_EQ(env("NCCL_SOCKET_IFNAME"), "lo");
  EXPECT_EQ(env("NCCL_IB_DISABLE"), "1");

  clear_nccl_env();
  setenv("NCCL_SOCKET_IFNAME", "eth7", 1);
  setenv("NCCL_IB_DISABLE", "0", 1);
  isolate_ranks_for_shared_gpu(dev, 0);
  EXPECT_EQ(env("NCCL_HOSTID"), "fakehost0");
  EXPECT_EQ(env("NCCL_SOCKET_IFNAME"), "eth7");
  EXPECT_EQ(env("NCCL_IB_DISABLE"), "0");

  clear_nccl_env();
  dev.one_node = false;
  isolate_ranks_for_shared_gpu(dev, 1);
  EXPECT_EQ(env("NCCL_HOSTID"), "fakehost1");
  EXPECT_EQ(env("NCCL_SOCKET_IFNAME"), "(unset)");
  EXPECT_EQ(env("NCCL_IB_DISABLE"), "(unset)");
  clear_nccl_env();
}
