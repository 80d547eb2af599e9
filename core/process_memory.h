// What the operating system says this process holds, measured rather than computed: the resident set
// now and its high-water mark (Linux /proc/self/status VmRSS, VmHWM). 0 where it cannot be read.
#pragma once
#include <cstddef>

namespace zero {

size_t resident_bytes();
size_t peak_resident_bytes();

}  // namespace zero
