// Fuzz target: the sharded-checkpoint manifest parser (checkpoint/manifest.h) on arbitrary text. Bad text
// is an InputError naming the file; a manifest that parses survives to_json -> from_json unchanged.
#include "checkpoint/manifest.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zero;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_clean_error("fuzz/manifest.json", [&] {
    const checkpoint::Manifest m = checkpoint::Manifest::parse(text, "fuzz/manifest.json");
    const nlohmann::json j = m.to_json();
    const checkpoint::Manifest again = checkpoint::Manifest::from_json(j, "round trip");
    fuzz::require(again.to_json() == j, "to_json -> from_json changes the manifest");
    // The layout a loader trusts, checked in exact 128-bit arithmetic: padded = shard * world covers the
    // group, and every tensor lies inside its group.
    for (const checkpoint::GroupEntry& g : m.groups) {
      fuzz::require((unsigned __int128)g.shard * unsigned(m.world) == g.padded && g.padded >= g.numel,
                    "group '" + g.name + "' has an impossible layout");
      for (const checkpoint::TensorEntry& t : g.tensors)
        fuzz::require((unsigned __int128)t.offset + t.numel <= g.numel, "tensor '" + t.name + "' lies outside its group");
    }
  });
  return 0;
}
