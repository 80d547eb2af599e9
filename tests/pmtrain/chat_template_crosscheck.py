#!/usr/bin/env python3
"""Our chat rendering (`pmtrain render`) against the Qwen3 chat template itself, rendered by jinja2 as
transformers' apply_chat_template renders it (a sandboxed environment with trim_blocks, lstrip_blocks and
the loopcontrols extension; add_generation_prompt false, no tools).

  1. tests/data/chat_pairs.jsonl (message lists and strings, prompt field "prompt"): each answer's
     conversation is the prompt's messages (a string: one user message) then the answer's (a string: one
     assistant message).
  2. tests/data/chat_strings.jsonl (strings only, prompt field "prompt", chat mode): prompt + answer as an
     hh transcript where both answers make one, else a plain prompt as the user's message and the answer
     as the assistant's.
  3. The bundled hh-rlhf files in chat mode: each transcript's "\\n\\nHuman:" / "\\n\\nAssistant:" turns, their
     text stripped, as user and assistant messages.

Expected text: the template's output less the closing "<|im_end|>\\n" of a final assistant message (the
dataset appends <|im_end|> as a token id). Exit 0 when every text matches, 1 at the first difference
(printed), 77 when python3 lacks jinja2.

usage: chat_template_crosscheck.py PMTRAIN TOKENIZER_CONFIG CHAT_PAIRS CHAT_STRINGS HH.jsonl.gz...
"""
import json
import re
import subprocess
import sys

try:
    import jinja2
    import jinja2.ext
    import jinja2.sandbox
except ImportError:
    print("SKIP: python3 lacks jinja2 (Debian: python3-jinja2)")
    sys.exit(77)


def template(tokenizer_config):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    with open(tokenizer_config, encoding="utf-8") as f:
        return env.from_string(json.load(f)["chat_template"])


def expected(tpl, messages):
    text = tpl.render(messages=messages, add_generation_prompt=False)
    if messages[-1]["role"] == "assistant":
        assert text.endswith("<|im_end|>\n"), text[-40:]
        text = text[: -len("<|im_end|>\n")]
    return text


def as_messages(value, role):
    if isinstance(value, list):
        return value
    return [{"role": role, "content": value}] if value.strip() else []


def hh_messages(transcript):
    """The turns of an hh transcript, or None when it is not one."""
    parts = re.split(r"(\n\nHuman:|\n\nAssistant:)", transcript)
    if len(parts) < 3 or parts[0].strip() != "":
        return None
    return [{"role": "user" if marker == "\n\nHuman:" else "assistant", "content": text.strip(" \t\r\n")}
            for marker, text in zip(parts[1::2], parts[2::2])]


def render(pmtrain, data, *settings):
    cmd = [pmtrain, "render", "--data", data] + [a for s in settings for a in ("--set", s)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def compare(what, got, want):
    if got == want:
        return True
    i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
    print("FAIL: %s differs at character %d:\n  ours:     %r\n  template: %r" % (what, i, got[max(0, i - 40):i + 60],
                                                                                 want[max(0, i - 40):i + 60]))
    return False


def read_jsonl(path):
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def string_conversations(rec):
    """Chat mode with a prompt field and string answers: the chosen and rejected message lists."""
    turns = [hh_messages(rec["prompt"] + rec[side]) for side in ("chosen", "rejected")]
    if all(t is not None for t in turns):
        return turns
    assert rec["prompt"].strip() and hh_messages(rec["prompt"]) is None, "neither a transcript nor a plain prompt"
    return [[{"role": "user", "content": rec["prompt"]}, {"role": "assistant", "content": rec[side]}]
            for side in ("chosen", "rejected")]


def check_file(pmtrain, tpl, path, settings, conversations):
    """Renders `path` with `settings`; each row's texts against the template over conversations(record),
    the chosen and the rejected message list. The number of texts checked, or None at the first failure."""
    records = read_jsonl(path)
    rows = render(pmtrain, path, *settings)
    if len(rows) != len(records):
        print("FAIL: %d rows for %d lines of %s" % (len(rows), len(records), path))
        return None
    for n, (rec, row) in enumerate(zip(records, rows), 1):
        if "skipped" in row:
            print("FAIL: %s:%d skipped: %s" % (path, n, row["skipped"]))
            return None
        for side, msgs in zip(("chosen", "rejected"), conversations(rec)):
            if not compare("%s:%d %s" % (path, n, side), row[side], expected(tpl, msgs)):
                return None
    return 2 * len(rows)


def main(pmtrain, tokenizer_config, chat_pairs, chat_strings, *hh_files):
    tpl = template(tokenizer_config)
    cases = [
        # 1. message lists and prompt fields
        (chat_pairs, ["data.prompt_field=prompt"],
         lambda rec: [as_messages(rec["prompt"], "user") + as_messages(rec[side], "assistant")
                      for side in ("chosen", "rejected")]),
        # 2. strings with a prompt field in chat mode
        (chat_strings, ["data.prompt_field=prompt", "data.format=chat"], string_conversations),
    ]
    # 3. hh-rlhf transcripts in chat mode
    cases += [(path, ["data.format=chat"], lambda rec: [hh_messages(rec[side]) for side in ("chosen", "rejected")])
              for path in hh_files]
    checked = 0
    for path, settings, conversations in cases:
        n = check_file(pmtrain, tpl, path, settings, conversations)
        if n is None:
            return 1
        checked += n
    print("chat template cross-check: %d texts identical to jinja2's rendering of %s" % (checked, tokenizer_config))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 5:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
