// The data pipeline's settings from a config's data section: one translation of data.* (format,
// bad_lines, too_long, fields, end token, max_len) for training, eval and `pmtrain score`.
#pragma once
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/pair_dataset.h"
#include "data/sampler.h"
#include "pmtrain/config.h"

namespace zero::pmtrain {

// Reader and length policy for `files`; ConfigError naming the key for an unknown value.
data::DataConfig data_config(const DataSection& d, const std::vector<std::string>& files);
data::BatchLayout batch_layout(const DataSection& d);
data::RemainderPolicy remainder_policy(const DataSection& d);

}  // namespace zero::pmtrain
