// Fuzz target: pmtrain's YAML config parser (pmtrain/config.h) on arbitrary text. Bad text is a
// ConfigError naming the source; a config that parses prints (to_yaml) to YAML that parses back to the
// same config.
#include "fuzz/fuzz_util.h"
#include "pmtrain/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zero;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_clean_error("fuzz.yaml", [&] {
    const pmtrain::Config c = pmtrain::parse_config(text, "fuzz.yaml", {});
    const std::string printed = pmtrain::to_yaml(c);
    std::string again;
    try {
      again = pmtrain::to_yaml(pmtrain::parse_config(printed, "printed.yaml", {}));
    } catch (const Error& e) {
      fuzz::fail(std::string("the printed config does not parse back: ") + e.what() + "\n" + printed);
    }
    fuzz::require(again == printed, "the printed config changes when parsed back:\n" + printed + "\n---\n" + again);
  });
  return 0;
}
