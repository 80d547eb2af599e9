// Which order the SIMT emulator (simt_emulator.h) runs threads and blocks in, chosen in-process: for a test
// that compares schedules in one run, here apart from the emulator's header so a test that only launches
// through the emulated runtime (tests/cuda/emulated) can switch without the kernel-side definitions.
#pragma once

namespace zero::simt {

// The schedule of the launches from here on, by ZERO_SIMT_SCHEDULE's names (reverse, ahead, random:SEED; ""
// or nullptr: the default order); std::invalid_argument for another name. Call it between launches.
void use_schedule(const char* name);

}  // namespace zero::simt
