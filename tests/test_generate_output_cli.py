#!/usr/bin/env python3
"""What `prefixcl generate` prints and where it stops, as a user runs it on
the committed fixtures (tests/fixtures/generate): without a tokenizer
(--prompt-ids) it stops at config.json's eos_token_id, as transformers'
generate does.

usage: test_generate_output_cli.py PREFIXCL FIXTURE_DIR   (standard library only)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run(exe, args, code=0):
    p = subprocess.run([exe] + args, capture_output=True, timeout=300)
    if p.returncode != code:
        sys.exit("%s: exit %d, expected %d\n%s" % (" ".join(args), p.returncode, code,
                                                   p.stderr.decode(errors="replace")))
    return p.stdout.decode("utf-8", errors="replace"), p.stderr.decode("utf-8", errors="replace")


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
    # --stop replaces the default: the whole 7 tokens again
    out, _ = run(exe, args + ["--stop", "5000"])
    if out.split() != ids:
        sys.exit("--stop 5000: %r, expected %r" % (out, ids))


def main():
    exe, fix = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        stops_at_config_eos(exe, fix, tmp)
    print("ok")


if __name__ == "__main__":
    main()
