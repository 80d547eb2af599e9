#include "pmtrain/data_setup.h"

#include "pmtrain/choice.h"

namespace zero::pmtrain {


data::DataConfig data_config(const DataSection& d, const std::vector<std::string>& files) {
  data::DataConfig dc;
  dc.files = files;
  dc.reader.chosen_field = d.chosen_field;
  dc.reader.rejected_field = d.rejected_field;
  dc.reader.mode = pick<data::TextMode>("data.format", d.format, {{"raw", data::TextMode::Raw}, {"chat", data::TextMode::Chat}});
  dc.reader.bad_lines =
      pick<data::BadLinePolicy>("data.bad_lines", d.bad_lines, {{"skip", data::BadLinePolicy::Skip}, {"fail", data::BadLinePolicy::Fail}});
  dc.end_token = d.end_token;
  dc.max_len = d.max_len;
  dc.too_long = pick<data::TooLongPolicy>("data.too_long", d.too_long,
                                          {{"truncate", data::TooLongPolicy::TruncateKeepEnd},
                                           {"truncate_keep_start", data::TooLongPolicy::TruncateKeepStart},
                                           {"drop", data::TooLongPolicy::Drop}});
  return dc;
}

data::BatchLayout batch_layout(const DataSection& d) {
  return pick<data::BatchLayout>("data.layout", d.layout, {{"padded", data::BatchLayout::Padded}, {"packed", data::BatchLayout::Packed}});
}

data::RemainderPolicy remainder_policy(const DataSection& d) {
  return pick<data::RemainderPolicy>("data.remainder", d.remainder,
                                     {{"drop", data::RemainderPolicy::Drop}, {"pad", data::RemainderPolicy::Pad}});
}

}  // namespace zero::pmtrain
