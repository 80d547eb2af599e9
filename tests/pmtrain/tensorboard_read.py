"""Reads a run's TensorBoard event files (run.tensorboard) the way TensorBoard does and checks them against the
run's metrics.jsonl: the TFRecord frames' masked CRC-32Cs (python3-crcmod's crc-32c), each Event decoded by
python3-protobuf from tensorboard_event.proto (TensorFlow's field numbers), the first carrying the file version,
the second the run's config.resolved.yaml as a Markdown code block (each line indented 4 spaces) in a text
summary tagged "config" (the text plugin's: a scalar DT_STRING tensor), the third the hparams plugin's session
start holding every key of config.resolved.yaml (read by PyYAML) as a scalar of its type, then one event per
train, eval and epoch record in file order at its step and time, holding every number of the record as a float32
scalar named <type>/<key>[/<key>...], and last, for a run that ended, the hparams plugin's session end: success
at the summary record's time, or failure (a run that stopped on an error), at the last record's step.

usage: tensorboard_read.py PROTO_PY_DIR RUN_DIR [--end=success|failure|none] [TAG ...]   (each TAG must be among
the scalars; --end: the session end wanted, default none)
Prints "<events> events, config text of <lines> lines, <hparams> hparams, <scalars> scalars, <steps> train steps,
session end <status>" on success."""
import glob, json, os, struct, sys

import crcmod.predefined
import yaml

sys.path.insert(0, sys.argv[1])
import tensorboard_event_pb2 as pb  # noqa: E402

crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def masked(b):
    c = crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frames(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        assert at + 12 <= len(data), f"{path}: a frame header cut short at byte {at}"
        head = data[at : at + 8]
        (n,) = struct.unpack("<Q", head)
        (head_crc,) = struct.unpack("<I", data[at + 8 : at + 12])
        assert head_crc == masked(head), f"{path}: length CRC wrong at byte {at}"
        body = data[at + 12 : at + 12 + n]
        assert len(body) == n and at + 16 + n <= len(data), f"{path}: a frame cut short at byte {at}"
        (body_crc,) = struct.unpack("<I", data[at + 12 + n : at + 16 + n])
        assert body_crc == masked(body), f"{path}: data CRC wrong at byte {at}"
        yield body
        at += 16 + n


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def numbers(prefix, obj):
    for k, v in obj.items():
        if isinstance(v, dict):
            yield from numbers(f"{prefix}/{k}", v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            yield f"{prefix}/{k}", float(v)


run = sys.argv[2]
want_end = "none"
tag_args = sys.argv[3:]
if tag_args and tag_args[0].startswith("--end="):
    want_end, tag_args = tag_args[0][len("--end="):], tag_args[1:]
files = glob.glob(os.path.join(run, "tensorboard", "events.out.tfevents.*"))
assert len(files) == 1, f"{len(files)} event files in {run}/tensorboard: {files}"
events = []
for body in frames(files[0]):
    e = pb.Event()
    e.ParseFromString(body)
    parts = [e, e.summary, *e.summary.value]
    parts += [p for v in e.summary.value for p in (v.tensor, v.tensor.tensor_shape, v.metadata, v.metadata.plugin_data)]
    assert not any(len(m.UnknownFields()) for m in parts), "the event holds fields that are not Event's"
    events.append(e)
assert events and events[0].WhichOneof("what") == "file_version", "the first event is not the file version"
assert events[0].file_version == "brain.Event:2", f"file version {events[0].file_version!r}"

config = open(os.path.join(run, "config.resolved.yaml")).read()
text = events[1] if len(events) > 1 else pb.Event()
assert text.step == 0 and text.wall_time == events[0].wall_time, "the config text is not at step 0 and the start"
assert len(text.summary.value) == 1, "the second event is not the config text"
v = text.summary.value[0]
assert v.tag == "config" and v.WhichOneof("value") == "tensor", f"the second event is {v.tag!r}, no text"
assert v.metadata.plugin_data.plugin_name == "text", f"plugin {v.metadata.plugin_data.plugin_name!r}"
assert v.tensor.dtype == pb.DT_STRING and not v.tensor.tensor_shape.dim and len(v.tensor.string_val) == 1, v.tensor
markdown = "".join("    " + line for line in config.splitlines(keepends=True))
assert v.tensor.string_val[0].decode() == markdown, "the config text is not config.resolved.yaml as a code block"

# The hyperparameters: each key of the resolved config ("section.key", or a top-level key) as a scalar of its
# type: a YAML bool as bool_value, a number as number_value (PyYAML reads YAML 1.1, where "1e-05" is a string: a
# string float() reads counts as the number), a string as string_value, a list or map as string_value holding
# YAML that reads back to it.
hp = events[2] if len(events) > 2 else pb.Event()
assert hp.step == 0 and hp.wall_time == events[0].wall_time, "the hparams are not at step 0 and the start"
assert len(hp.summary.value) == 1 and hp.summary.value[0].tag == "_hparams_/session_start_info", "no hparams third"
v = hp.summary.value[0]
assert v.WhichOneof("value") is None, "the hparams summary holds a value (torch's add_hparams writes none)"
assert v.metadata.plugin_data.plugin_name == "hparams", f"plugin {v.metadata.plugin_data.plugin_name!r}"
data = pb.HParamsPluginData()
data.ParseFromString(v.metadata.plugin_data.content)
assert not data.UnknownFields() and data.version == 0 and data.WhichOneof("data") == "session_start_info", data
start = data.session_start_info
assert not start.UnknownFields() and start.start_time_secs == events[0].wall_time, "session start time"
assert not (start.model_uri or start.monitor_url or start.group_name), start
want_hp = {}
for key, value in yaml.safe_load(config).items():
    if isinstance(value, dict):
        want_hp.update({f"{key}.{k}": x for k, x in value.items()})
    else:
        want_hp[key] = value
assert sorted(start.hparams) == sorted(want_hp), f"hparams {sorted(start.hparams)} != keys {sorted(want_hp)}"


def as_number(x):
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    try:
        return float(x) if isinstance(x, str) else None
    except ValueError:
        return None


for key, want in want_hp.items():
    got = start.hparams[key]
    kind = got.WhichOneof("kind")
    assert not got.UnknownFields(), key
    if isinstance(want, bool):
        assert kind == "bool_value" and got.bool_value == want, f"hparam {key}: {got} for {want!r}"
    elif as_number(want) is not None:
        assert kind == "number_value" and got.number_value == as_number(want), f"hparam {key}: {got} for {want!r}"
    elif isinstance(want, str):
        assert kind == "string_value" and got.string_value == want, f"hparam {key}: {got} for {want!r}"
    else:
        assert kind == "string_value" and yaml.safe_load(got.string_value) == want, f"hparam {key}: {got} for {want!r}"

records = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
want = []
for r in records:
    if "step" not in r or r.get("type") not in ("train", "eval", "epoch"):
        continue
    rest = {k: v for k, v in r.items() if k not in ("type", "step", "time")}
    want.append((r["type"], r["step"], r["time"], list(numbers(r["type"], rest))))
got = events[3:]
# The session's end, last: its status, at the summary's time (success) or after the last record (failure), at the
# records' highest step, so no step goes back.
end = "none"
last = got[-1] if got else pb.Event()
if len(last.summary.value) == 1 and last.summary.value[0].tag == "_hparams_/session_end_info":
    got = got[:-1]
    v = last.summary.value[0]
    assert v.WhichOneof("value") is None and v.metadata.plugin_data.plugin_name == "hparams", v
    data = pb.HParamsPluginData()
    data.ParseFromString(v.metadata.plugin_data.content)
    assert not data.UnknownFields() and data.version == 0 and data.WhichOneof("data") == "session_end_info", data
    info = data.session_end_info
    end = {pb.STATUS_SUCCESS: "success", pb.STATUS_FAILURE: "failure"}.get(info.status, f"status {info.status}")
    assert info.end_time_secs == last.wall_time, "the session end's time is not its event's"
    steps = [r["step"] for r in records if isinstance(r.get("step"), int)]
    assert last.step == max(steps, default=0), f"the session end at step {last.step}, the records' last {max(steps)}"
    summaries = [r for r in records if r.get("type") == "summary"]
    if end == "success":
        assert summaries and info.end_time_secs == summaries[-1]["time"], "a success not at the summary's time"
    else:
        assert not summaries and info.end_time_secs >= max(r["time"] for r in records), "a failure before the end"
assert end == want_end, f"session end {end}, wanted {want_end}"
assert len(got) == len(want), f"{len(got)} scalar events for {len(want)} records with a step"
tags = set()
for i, (e, (_, step, time, scalars)) in enumerate(zip(got, want)):
    assert e.WhichOneof("what") == "summary", f"event {i + 3} holds no summary"
    assert e.step == step, f"event {i + 3}: step {e.step}, record step {step}"
    assert e.wall_time == time, f"event {i + 3}: wall time {e.wall_time}, record time {time}"
    assert all(v.WhichOneof("value") == "simple_value" for v in e.summary.value), f"event {i + 3}: not all scalars"
    have = [(v.tag, v.simple_value) for v in e.summary.value]
    wanted = [(t, f32(x)) for t, x in scalars]
    same = lambda a, b: a == b or (a != a and b != b)  # NaN equals NaN here
    assert len(have) == len(wanted) and all(t == u and same(x, y) for (t, x), (u, y) in zip(have, wanted)), (
        f"event {i + 3} (step {step}): {have[:4]}... != {wanted[:4]}...")
    tags.update(t for t, _ in have)
for t in tag_args:
    assert t in tags, f"no scalar {t} (of {sorted(tags)[:12]}...)"
train_steps = [s for (kind, s, _, _) in want if kind == "train"]
assert len(train_steps) == len(set(train_steps)), f"a train step twice: {train_steps}"
print(f"{len(events)} events, config text of {len(config.splitlines())} lines, {len(start.hparams)} hparams, "
      f"{sum(len(s) for _, _, _, s in want)} scalars, {len(train_steps)} train steps, session end {end}")
