#include "core/host_name.h"

#include <unistd.h>

namespace zero {

std::string host_name(const std::string& fallback) {
  char host[256] = {};  // POSIX's HOST_NAME_MAX is 255; one byte more keeps a truncated name terminated
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return fallback;
  return host;
}

}  // namespace zero
