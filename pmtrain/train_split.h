// The training split as one dataset: data.train_files, then each data.train_sets set in name order, with
// data.max_train_pairs applied to the whole (its first N pairs), and its training mix (data/mix.h): a
// source per set at its data.train_weights weight (default 1) and data.train_files' at 1. Without sets
// there is no mix (every pair once an epoch, as before sets existed). The trainer and `pmtrain plan` read
// the split through here, each loading a source its own way.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "data/mix.h"
#include "data/pair_dataset.h"
#include "pmtrain/config.h"

namespace zero::pmtrain {

struct TrainSplit {
  data::PairDataset pairs;
  data::Mix mix;  // sources named by set ("train_files" for data.train_files); empty without sets
};

// One source's pairs: data.train_files (set "") or the named data.train_sets set.
using LoadTrainSource = std::function<data::PairDataset(const std::vector<std::string>& files, const std::string& set)>;

// ConfigError when there is no training data (neither key) or the mix is unsound (data::check_mix).
TrainSplit load_train_split(const Config& cfg, const LoadTrainSource& load);

// For the run log: "helpful 120 pairs x 0.5 = 60, harmless 80 x 2 = 160: 220 pairs an epoch".
std::string describe_mix(const data::Mix& mix);

}  // namespace zero::pmtrain
