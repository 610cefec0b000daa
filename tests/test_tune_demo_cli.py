#!/usr/bin/env python3
"""The README's demonstration and its next step, as a user types them (the
steps made small): `prefixcl tune` with no --model writes the demonstration
model's folder (config.json, model.safetensors, tokenizer.json) beside the
adapter, and `prefixcl generate --model tune-out/demo-model --adapter
tune-out --prompt "The river"`, eval and attn-map open it; eval's loss of
the adapter is tune's own evaluation on the same file (one rule for the
examples, which both print), unless --no-eos says otherwise.

usage: test_tune_demo_cli.py PREFIXCL WORK_DIR   (standard library only)
"""
import os
import re
import shutil
import sys

from cli_run import run


def main():
    exe, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(work, "eval.txt"), "w") as f:
        f.write("The river ran past the mill.\nA boat was on it.\n")
    out, _ = run(exe, ["tune", "--steps", "1", "--batch", "2", "--max-length", "8", "--eval", "eval.txt"],
                 cwd=work, timeout=600)
    tuned_out = out
    model = os.path.join(work, "tune-out", "demo-model")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not os.path.isfile(os.path.join(model, name)):
            sys.exit("tune-out/demo-model/%s is missing: %r" % (name, os.listdir(model)))
    hint = 'prefixcl generate --model tune-out/demo-model --adapter tune-out --prompt "The river"'
    if hint not in out:
        sys.exit("tune does not show the next step: %r" % out)

    out, err = run(exe, ["generate", "--model", "tune-out/demo-model", "--adapter", "tune-out",
                         "--prompt", "The river", "--max-new-tokens", "4"], cwd=work)
    if not out.strip() or not re.search(r"decode: 3 tokens", err):
        sys.exit("generate on the demonstration model: %r %r" % (out, err))
    out, _ = run(exe, ["eval", "--model", "tune-out/demo-model", "--adapter", "tune-out", "--data", "eval.txt",
                       "--max-length", "8"], cwd=work)
    if not re.search(r"frozen model: loss [0-9.]+", out) or not re.search(r"with tune-out: loss [0-9.]+", out):
        sys.exit("eval on the demonstration model: %r" % out)
    # one rule for the examples: eval's loss of the adapter is tune's last
    # evaluation on the same file, and both say how they built them
    tuned = float(re.search(r"after ([0-9.]+)", tuned_out).group(1))
    evaluated = float(re.search(r"with tune-out: loss ([0-9.]+)", out).group(1))
    if abs(tuned - evaluated) > 1e-5 * tuned:
        sys.exit("tune's evaluation %.6f, eval's %.6f on the same adapter and file" % (tuned, evaluated))
    rule = "examples: 0 special tokens a text (the tokenizer's post-processor), EOS (id 0) appended, at most 8"
    if rule not in out or rule not in tuned_out:
        sys.exit("how the examples were built: %r %r" % (tuned_out, out))
    plain, _ = run(exe, ["eval", "--model", "tune-out/demo-model", "--adapter", "tune-out", "--data", "eval.txt",
                         "--max-length", "8", "--no-eos"], cwd=work)
    if "no EOS" not in plain or re.findall(r"loss ([0-9.]+)", plain) == re.findall(r"loss ([0-9.]+)", out):
        sys.exit("eval --no-eos: %r" % plain)
    run(exe, ["attn-map", "--model", "tune-out/demo-model", "--adapter", "tune-out", "--text", "The river",
              "--layer", "0", "--head", "0", "--out", "map.png"], cwd=work)
    shutil.rmtree(work, ignore_errors=True)
    print("ok")


if __name__ == "__main__":
    main()
