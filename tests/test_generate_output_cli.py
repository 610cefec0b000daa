#!/usr/bin/env python3
"""What `prefixcl generate` prints and where it stops, as a user runs it on
the committed fixtures (tests/fixtures/generate): several requests print a
block each (header, the text as generated, a footer), a text with newlines
included; --json prints one JSON object a line per request; without a
tokenizer (--prompt-ids) it stops at config.json's eos_token_id, as
transformers' generate does; --stop TEXT ends the text before a string,
--stop-id at a token.

usage: test_generate_output_cli.py PREFIXCL FIXTURE_DIR   (standard library only)
"""
import json
import os
import re
import shutil
import sys
import tempfile

from cli_run import run


def stops_at_config_eos(exe, fix, tmp):
    """The llama fixture has no tokenizer; its greedy ids for "5 17 3 44 9"
    are the first line of expected.txt (HF generate with min_new_tokens, so
    eos 88 never ends them). With eos_token_id set to the third of them,
    generate stops there, the stop token kept (as HF returns it)."""
    src = os.path.join(fix, "llama")
    with open(os.path.join(src, "expected.txt")) as f:
        adapter, prompt, ids = f.readline().rstrip("\n").split("\t")
    ids = ids.split()
    eos = ids[2]
    if eos in ids[:2] or adapter != "-":
        sys.exit("fixture: %r" % ids)
    model = os.path.join(tmp, "llama-eos")
    os.mkdir(model)
    shutil.copy(os.path.join(src, "model.safetensors"), model)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    args = ["generate", "--model", model, "--prompt-ids", prompt, "--max-new-tokens", "7"]
    for value in (int(eos), [5000, int(eos)]):
        cfg["eos_token_id"] = value
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump(cfg, f)
        out, _ = run(exe, args)
        if out.split() != ids[:3]:
            sys.exit("eos_token_id %r: %r, expected %r" % (value, out, ids[:3]))
    out, _ = run(exe, args + ["--json"])
    o = json.loads(out)
    if (o["prompt"], o["text"], o["adapter"], o["stop_reason"]) != (None, None, None, "stop") or \
            o["ids"] != [int(x) for x in ids[:3]] or o["prompt_ids"] != [int(x) for x in prompt.split()]:
        sys.exit("--json at eos: %r" % o)
    # --stop-id replaces the default: the whole 7 tokens again
    out, _ = run(exe, args + ["--stop-id", "5000"])
    if out.split() != ids:
        sys.exit("--stop-id 5000: %r, expected %r" % (out, ids))
    # --stop takes text, which a folder without a tokenizer cannot read
    _, err = run(exe, args + ["--stop", "x"], code=1)
    if "--stop-id" not in err:
        sys.exit("--stop without a tokenizer: %r" % err)


def stops_at_string(exe, fix):
    """--stop TEXT as the server's "stop" and llama.cpp's: the text ends
    before the string's first occurrence, the reason is "stop", and the
    single request's text is printed up to there, newline-terminated."""
    model = os.path.join(fix, "gpt2")
    with open(os.path.join(model, "text.txt")) as f:
        _, prompt, expect = f.readline().rstrip("\n").split("\t")
    prompt, expect = json.loads(prompt), json.loads(expect)
    stop = expect[5:8]
    cut = expect.find(stop)
    if len(stop) != 3 or cut < 1:
        sys.exit("fixture text %r" % expect)
    args = ["generate", "--model", model, "--prompt", prompt, "--max-new-tokens", "7", "--stop", stop]
    out, _ = run(exe, args)
    if out != expect[:cut] + "\n":
        sys.exit("--stop %r: %r, expected %r" % (stop, out, expect[:cut] + "\n"))
    o = json.loads(run(exe, args + ["--json"])[0])
    if o["text"] != expect[:cut] or o["stop_reason"] != "stop":
        sys.exit("--stop %r --json: %r" % (stop, o))


BLOCK = re.compile(r'(?:^|\n)=== prompt (\d+): (.*?) \| (adapter \S+|no adapter) ===\n(.*?)\n'
                   r'--- (\d+) tokens?, stop: (stop|length), [0-9.]+ tokens/s ---\n', re.S)
KEYS = ["prompt", "prompt_ids", "adapter", "ids", "text", "stop_reason", "tokens_per_s"]


def newline_model(fix, tmp):
    """The gpt2 fixture whose token "Ġquietly" (the last greedy token of "the
    quick brown fox" with adapter0) decodes as " quiet\n\nly": a generated
    text with newlines."""
    src = os.path.join(fix, "gpt2")
    model = os.path.join(tmp, "gpt2-newline")
    os.mkdir(model)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(src, name), model)
    shutil.copytree(os.path.join(src, "adapter0"), os.path.join(model, "adapter0"))
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    vocab["\u0120quiet\u010a\u010aly"] = vocab.pop("\u0120quietly")
    tok["model"]["merges"] = [m for m in tok["model"]["merges"] if m.replace(" ", "") != "\u0120quietly"]
    with open(os.path.join(model, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f)
    return model


def blocks_and_json(exe, fix, tmp):
    model = newline_model(fix, tmp)
    adapter = os.path.join(model, "adapter0")
    prompts = ["the quick brown fox", "Hello, world"]
    args = ["generate", "--model", model, "--adapter", adapter, "--max-new-tokens", "7"]
    for p in prompts:
        args += ["--prompt", p]
    single = [run(exe, ["generate", "--model", model, "--adapter", adapter, "--max-new-tokens", "7",
                        "--prompt", p])[0] for p in prompts]
    if "\n\n" not in single[0].rstrip("\n"):
        sys.exit("the fixture's text has no newline: %r" % single[0])

    out, _ = run(exe, args)
    blocks = BLOCK.findall(out)
    if len(blocks) != 2 or "".join(m.group(0) for m in BLOCK.finditer(out)) != out:
        sys.exit("blocks: %r" % out)
    for i, (index, prompt, who, text, count, stop) in enumerate(blocks):
        if (index, prompt, who, count, stop) != (str(i), json.dumps(prompts[i]), "adapter " + adapter, "7", "length"):
            sys.exit("block %d: %r" % (i, blocks[i]))
        if text + "\n" != single[i]:
            sys.exit("block %d text %r, alone %r" % (i, text, single[i]))

    out, _ = run(exe, args + ["--json"])
    lines = out.split("\n")
    if len(lines) != 3 or lines[2] != "":
        sys.exit("--json: one line per request expected: %r" % out)
    for i, line in enumerate(lines[:2]):
        o = json.loads(line)
        if list(o) != KEYS:
            sys.exit("--json keys %r" % list(o))
        if (o["prompt"], o["adapter"], o["stop_reason"], len(o["ids"])) != (prompts[i], adapter, "length", 7):
            sys.exit("--json %d: %r" % (i, o))
        if o["text"] + "\n" != single[i] or not all(isinstance(x, int) for x in o["ids"] + o["prompt_ids"]):
            sys.exit("--json %d text %r, alone %r" % (i, o["text"], single[i]))
        if not o["tokens_per_s"] > 0:
            sys.exit("--json %d tokens/s %r" % (i, o["tokens_per_s"]))
    # a single request with --json: the object, not the streamed text
    out, _ = run(exe, args[:-2] + ["--json"])
    if json.loads(out)["text"] + "\n" != single[0]:
        sys.exit("--json single: %r" % out)


def main():
    exe, fix = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        blocks_and_json(exe, fix, tmp)
        stops_at_config_eos(exe, fix, tmp)
        stops_at_string(exe, fix)
    print("ok")


if __name__ == "__main__":
    main()
