// What differs between two resolved configs (config.resolved.yaml's text, which each checkpoint's manifest also
// keeps): the keys whose value changed, appeared or went. A resumed run says which of its settings differ from
// the run that saved the checkpoint (a learning rate changed on purpose, a requeued job's OMP_NUM_THREADS, a
// world size), so a curve that bends at a resume has its reason in the log.
// Read as YAML, not through the schema: a checkpoint saved by another pmtrain version, with keys this one does
// not know or no longer has, compares too.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "pmtrain/config.h"

namespace zero::pmtrain {

struct ConfigChange {
  std::string key;                    // dotted, as --set names it: "optim.lr"
  std::optional<std::string> before;  // the value as YAML has it (a list in flow style: [a, b]); none: not there
  std::optional<std::string> after;   // likewise, in the later config
};

// Keys in the later config's order, then those only the earlier one has. Throws ConfigError (naming `what`) when
// a text is not a YAML mapping.
std::vector<ConfigChange> config_changes(const std::string& before_yaml, const std::string& after_yaml,
                                         const std::string& what);

// "optim.lr 1e-05 -> 2e-05; threads 1 -> 2; run.resume \"\" -> auto; data.new_key (none) -> 3": the first `most`
// of them, then "; and N more".
std::string describe_changes(const std::vector<ConfigChange>& changes, size_t most);

// The line a resume prints (and `train --dry-run` with --resume): "N settings differ from the run that saved the
// checkpoint: ..." between a checkpoint's saved config (its manifest's) and `now`, leaving out run.resume and
// run.start_over (how a run starts, not how it trains); "" when nothing else differs. A saved config that does
// not read gives a line saying so, not an error: a checkpoint is loaded for its weights and state.
std::string settings_changed_line(const std::string& saved_config, const Config& now, const std::string& checkpoint_dir);

}  // namespace zero::pmtrain
