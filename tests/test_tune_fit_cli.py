#!/usr/bin/env python3
"""The defaults fit a small model, and what does not fit names the option to
change, as a user runs the commands on the committed tiny GPT-2 (64
positions, tests/fixtures/generate/gpt2): `prefixcl tune` with the default
--max-length (128) and prefix (20) caps the length at 44 and says so once,
then trains, removing an earlier gain run's gains from the folder; the
adapter it writes serves generate; a --max-length given
that does not fit, a --prefix-len that leaves no room, eval's long
--max-length (capped, said once), generate's --max-new-tokens and attn-map's
long --ids are named in their messages (tune's in the options' names, exit
2 as a bad option). tune's other options as pretrain names them:
--num-virtual-tokens (PEFT's name of --prefix-len), --accumulate (the
loss.csv of two batches a step of 4 is that of one of 8), --eval-every
(loss.csv's eval_loss at those steps), --recompute (the same curve), the
learning rate in loss.csv.

usage: test_tune_fit_cli.py PREFIXCL FIXTURE_DIR   (standard library only)
"""
import os
import re
import sys
import tempfile

from cli_run import run


def main():
    exe, fix = sys.argv[1], sys.argv[2]
    model = os.path.join(fix, "gpt2")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "train.txt")
        with open(data, "w") as f:
            for i in range(30):
                f.write("the quick brown fox jumps over the lazy dog, number %d\n" % i)
        out_dir = os.path.join(tmp, "out")
        # an earlier gain run's outputs in the folder: a run without a gain removes them
        os.mkdir(out_dir)
        for name in ("gains.safetensors", "gains.png"):
            with open(os.path.join(out_dir, name), "wb") as f:
                f.write(b"an earlier run's")
        tune = ["tune", "--model", model, "--data", data, "--out", out_dir, "--steps", "2"]
        out, err = run(exe, tune)
        if any(os.path.exists(os.path.join(out_dir, n)) for n in ("gains.safetensors", "gains.png")):
            sys.exit("tune without a gain left an earlier run's gains")
        notes = [l for l in err.splitlines() if "capped" in l]
        if len(notes) != 1 or "--max-length 128 (the default) capped at 44" not in notes[0] or "--prefix-len" not in notes[0] \
                or "64 positions" not in notes[0]:
            sys.exit("tune's note on the length: %r" % err)
        if "batch 8 x 44 tokens" not in out:
            sys.exit("tune does not train with the capped length: %r" % out)
        # tokens/s and the MFU (frozen weights: 4 N + 12 L T d, T = 44 + the prefix 20)
        if not re.search(r"^step 1/2 .* tokens/s \d+ mfu \d+\.\d\d% ", out, re.M) or \
                not re.search(r": \d+ tokens/s, MFU \d+\.\d\d% of 1 x [\d.]+ GFLOP/s \(4 N \+ 12 L T d", out):
            sys.exit("tune's tokens/s and MFU: %r" % out)
        # the next step: the adapter serves generate
        out, _ = run(exe, ["generate", "--model", model, "--adapter", out_dir, "--prompt", "the quick",
                           "--max-new-tokens", "3"])
        if not out.strip():
            sys.exit("generate with the tuned adapter printed nothing")

        # a length that fits: no note; one given that does not: the options to change
        _, err = run(exe, tune + ["--max-length", "30"])
        if "capped" in err:
            sys.exit("a fitting --max-length: %r" % err)
        _, err = run(exe, tune + ["--max-length", "60"], 2)
        if "--max-length 60 + --prefix-len 20 exceed the model's 64 positions" not in err \
                or "lower --max-length to 44 or less, or --prefix-len" not in err:
            sys.exit("tune --max-length 60: %r" % err)
        # no room for tokens: the option to change, under either of its names
        for name in ("--prefix-len", "--num-virtual-tokens"):
            _, err = run(exe, tune + [name, "63"], 2)
            if "lower --prefix-len" not in err or "64 positions" not in err:
                sys.exit("tune %s 63: %r" % (name, err))
        _, err = run(exe, tune + ["--prefix-len", "4", "--num-virtual-tokens", "5"], 2)
        if "give one of them" not in err:
            sys.exit("two prefix lengths: %r" % err)

        # --accumulate 2 of --batch 4: the curve of --batch 8 (the same
        # examples a step, the gradient a mean of the two halves' means:
        # equal where the halves score as many tokens, as here)
        def curve(extra, name):
            folder = os.path.join(tmp, name)
            run(exe, ["tune", "--model", model, "--data", data, "--out", folder, "--steps", "3",
                      "--max-length", "16", "--prefix-len", "4"] + extra)
            with open(os.path.join(folder, "loss.csv")) as f:
                return [line.rstrip("\n").split(",") for line in f]
        whole = curve(["--batch", "8"], "whole")
        halves = curve(["--batch", "4", "--accumulate", "2", "--eval-every", "2"], "halves")
        if whole[0] != ["step", "loss", "grad_norm", "eval_loss", "lr"] or len(whole) != 5 or len(halves) != 5:
            sys.exit("loss.csv: %r %r" % (whole, halves))
        for a, b in zip(whole[2:], halves[2:]):
            if a[0] != b[0] or abs(float(a[1]) - float(b[1])) > 1e-5 * abs(float(a[1])) or a[4] != b[4]:
                sys.exit("--accumulate 2 x --batch 4 %r, --batch 8 %r" % (halves, whole))
        if [r[3] != "" for r in halves] != [True, True, False, True, True] or not float(whole[3][4]) > 0:
            sys.exit("--eval-every 2: eval_loss at 0, 2 and 3; lr: %r %r" % (halves, whole))
        if curve(["--batch", "8", "--recompute"], "recomputed") != whole:
            sys.exit("--recompute changed the curve")

        # eval caps a long --max-length and says so once
        out, err = run(exe, ["eval", "--model", model, "--adapter", out_dir, "--data", data, "--max-length", "500"])
        if len([l for l in err.splitlines() if "--max-length 500 capped at 44" in l]) != 1:
            sys.exit("eval's note on the length: %r" % err)
        # generate: too many new tokens names --max-new-tokens and what fits
        _, err = run(exe, ["generate", "--model", model, "--adapter", out_dir, "--prompt", "the quick",
                           "--max-new-tokens", "100"], 1)
        if "lower --max-new-tokens to" not in err:
            sys.exit("generate --max-new-tokens 100: %r" % err)
        # attn-map: too many ids for the positions
        _, err = run(exe, ["attn-map", "--model", model, "--ids", ",".join(["5"] * 70), "--layer", "0",
                           "--head", "0", "--out", os.path.join(tmp, "map.png")], 2)
        if "shorten --text (or --ids)" not in err:
            sys.exit("attn-map with 70 ids: %r" % err)
    print("ok")


if __name__ == "__main__":
    main()
