#include "core/process_memory.h"

#include <cstdio>
#include <cstring>

namespace zero {
namespace {

// The value of a "Key:   1234 kB" line of /proc/self/status, in bytes.
size_t status_kb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t kb = 0;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      std::sscanf(line + n + 1, "%zu", &kb);
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

}  // namespace

size_t resident_bytes() { return status_kb("VmRSS"); }
size_t peak_resident_bytes() { return status_kb("VmHWM"); }

}  // namespace zero
