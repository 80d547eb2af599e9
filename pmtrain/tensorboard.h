#pragma once
// TensorBoard's view of a run (run.tensorboard): metrics.jsonl's records as an event file in
// <run.dir>/tensorboard, what `tensorboard --logdir` reads (HF Trainer's report_to tensorboard, DeepSpeed's
// tensorboard monitor). metrics.jsonl stays the record: the event file is rebuilt from its kept records each
// time a run starts (MetricsLog), so a resumed run never shows a step twice and needs no purge by TensorBoard.
//
// The format, TensorFlow's TFRecord framing of tensorflow.Event protobufs (tensorboard's reader checks both CRCs):
//   record         = u64 length (little-endian) | u32 masked_crc(the length's 8 bytes) | data | u32 masked_crc(data)
//   masked_crc(b)  = rotate_right(crc32c(b), 15) + 0xa282ead8          (crc32c: Castagnoli, reflected, as in iSCSI)
//   data           = Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary        = { repeated Value value = 1; }
//   Value          = { string tag = 1; float simple_value = 2; TensorProto tensor = 8; SummaryMetadata metadata = 9; }
// The file's first event carries file_version "brain.Event:2"; then one event per train, eval and epoch record,
// at that step and the record's "time", whose scalars are every number in the record (record_scalars).
// A text (the run's resolved config, as HF Trainer logs its arguments) is what TensorBoard's text plugin reads:
//   Value { tag; metadata = { plugin_data = 1: { plugin_name = 1: "text" } };
//           tensor = { dtype = 1: DT_STRING (7); tensor_shape = 2: {} (a scalar); string_val = 8: the text } }
// The run's hyperparameters (every resolved config key, as HF Trainer logs its arguments) are what TensorBoard's
// hparams plugin reads as a session's start (tensorboard/plugins/hparams/plugin_data.proto), in the run of its
// scalars, so the HParams tab lists each run (a sweep's cells side by side) with its keys and its metrics:
//   Value { tag = 1: "_hparams_/session_start_info";
//           metadata = 9: { plugin_data = 1: { plugin_name = 1: "hparams"; content = 2: HParamsPluginData } } }
//   HParamsPluginData = { version = 1: 0; session_start_info = 3: SessionStartInfo }
//   SessionStartInfo  = { map<string, google.protobuf.Value> hparams = 1; double start_time_secs = 5; }
//   map entry         = { key = 1; value = 2 }      google.protobuf.Value = { number_value = 2 (double);
//                                                                             string_value = 3; bool_value = 4 }
// No tensor, as torch's SummaryWriter.add_hparams writes it (HF's TensorBoardCallback calls that). A run that
// ends also gets the session's end, which the HParams tab shows as its status:
//   Value { tag = 1: "_hparams_/session_end_info"; metadata = 9: { plugin_data = 1: { plugin_name = 1: "hparams";
//           content = 2: { session_end_info = 4: { status = 1: 1 success | 2 failure; double end_time_secs = 2 } } } } }
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pmtrain/config.h"

namespace zero::pmtrain {

// CRC-32C (Castagnoli) of n bytes: the checksum TFRecord frames with.
uint32_t crc32c(const void* data, size_t n);

// The scalars of one metrics record, in the record's key order: "<type>/<key>" for each number (booleans and
// strings are not scalars, nor is a NaN or an infinity, which metrics.jsonl holds as null), nested objects joined
// with '/' ("train/time_s/gemm", "eval/sets/helpful/loss");
// "type", "step" and "time" are the event's own fields. Only train, eval and epoch records have scalars: empty
// for another type (a resume) and for a record without a type or a step (the summary).
std::vector<std::pair<std::string, double>> record_scalars(const nlohmann::json& record);

class EventFile {
 public:
  // Removes the event files (events.out.tfevents.*) dir holds and opens a new one there (dir created), named
  // and begun (the file-version event) at wall_time, Unix seconds (MetricsLog's clock, which stamps the records).
  EventFile(const std::string& dir, double wall_time);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;
  // Appends the record as one event at its "time" (a record without one: the file's start; a record without
  // scalars writes nothing); false when the write failed.
  bool write(const nlohmann::json& record);
  // Appends `markdown` as a text summary (TensorBoard's Text tab) named tag at step 0 and the file's start time;
  // false when the write failed.
  bool write_text(const std::string& tag, const std::string& markdown);
  // Appends the run's hyperparameters as the hparams plugin's session start, at step 0 and the file's start
  // time; false when the write failed.
  bool write_hparams(const std::vector<std::pair<std::string, ConfigScalar>>& hparams);
  // Appends the hparams plugin's session end: the run succeeded or failed, at end_time (Unix seconds), as an event
  // at `step` (the run's last: no step goes back); false when the write failed.
  bool write_session_end(bool succeeded, double end_time, int64_t step);
  const std::string& path() const { return path_; }

 private:
  bool append(const std::string& event);  // frames and writes one serialized Event
  FILE* file_ = nullptr;
  std::string path_;
  double start_time_ = 0;
};

}  // namespace zero::pmtrain
