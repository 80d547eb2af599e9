// The backend the engine-level tests run on. Default: the CPU backend (CpuOps + MpiCommunicator).
// With ZERO_TEST_BACKEND=scrambled: a backend whose memory the host cannot use directly: every byte
// of its storage is kept XOR-scrambled, and only its own ops, its communicator and its copies to and
// from the host unscramble it. Code that reads or writes backend memory with plain host loads,
// stores or memset (instead of copy_to_host / copy_from_host / download / upload) sees or writes
// garbage there, and the test that covers it fails: the CPU stand-in for device memory.
#pragma once
#include <mpi.h>

#include <memory>

#include "comm/communicator.h"
#include "zero/device_ops.h"

namespace zero::testing {

bool scrambled_backend();  // ZERO_TEST_BACKEND=scrambled
std::unique_ptr<DeviceOps> make_test_ops();
std::unique_ptr<Communicator> make_test_comm(MPI_Comm comm);

// The scrambled backend itself (for tests that want it regardless of the environment).
std::unique_ptr<DeviceOps> make_scrambled_ops();
std::unique_ptr<Communicator> make_scrambled_comm(MPI_Comm comm);

}  // namespace zero::testing
