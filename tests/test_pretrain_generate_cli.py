#!/usr/bin/env python3
"""Generating with the gains of `prefixcl pretrain`: a tiny GPT-2 pre-trained
from a config that gives neither vocab_size nor bos/eos ids (the folder's
config.json gets them from the tokenizer, and the tokenizer's files are
copied beside the weights, so `generate --model OUT --prompt` runs on the
folder alone)
for a few steps with `--gain linear` (and with `--gain dim`) generates with
`--adapter OUT/gains.safetensors`, and with `--adapter OUT` (the folder
stands for its gains file) the same tokens; gains that matter (written here,
large, for the generate fixture's GPT-2) change the tokens, so the tool
applies them; a gains file beside a
prefix adapter, and a gains file of another model, are refused by name.

usage: test_pretrain_generate_cli.py PREFIXCL DEMO_DIR GENERATE_FIXTURES
(standard library only)
"""
import json
import os
import struct
import sys
import tempfile

from cli_run import run

CONFIG = '{"model_type": "gpt2", "n_embd": 48, "n_layer": 2, "n_head": 4, "n_positions": 64}'
GEN = ["--prompt-ids", "5 17 3 250 9", "--max-new-tokens", "8", "--json"]


def ids_of(stdout):
    rows = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return [r["ids"] for r in rows]


def write_gains(path, values, layers, heads):
    """A gains file as pretraining writes it (safetensors, F32 [L, H])."""
    header = {"__metadata__": {"format": "prefixcl-gains-1", "gain_mode": "linear", "structured": "false"},
              "gains": {"dtype": "F32", "shape": [layers, heads], "data_offsets": [0, 4 * len(values)]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + struct.pack("<%df" % len(values), *values))


def main():
    exe, demo, fixtures = sys.argv[1], sys.argv[2], sys.argv[3]
    data = os.path.join(demo, "train.txt")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "tiny.json")
        with open(cfg, "w") as f:
            f.write(CONFIG)
        common = ["--config", cfg, "--tokenizer", demo, "--data", data, "--block", "32", "--batch", "2",
                  "--lr", "3e-3", "--gain-lr", "3e-2", "--gain-ramp", "1", "--warmup", "1", "--seed", "3",
                  "--eval-blocks", "1"]
        for mode in ("linear", "dim"):
            out = os.path.join(tmp, mode)
            stdout, _ = run(exe, ["pretrain", "--out", out, "--steps", "3", "--gain", mode] + common)
            gains = os.path.join(out, "gains.safetensors")
            if "--adapter %s" % gains not in stdout:
                sys.exit("pretrain does not say how to generate with the gains: %r" % stdout)
            with_file, _ = run(exe, ["generate", "--model", out, "--adapter", gains] + GEN)
            with_dir, _ = run(exe, ["generate", "--model", out, "--adapter", out] + GEN)
            got = ids_of(with_file)
            if len(got) != 1 or len(got[0]) != 8 or ids_of(with_dir) != got:
                sys.exit("%s: generate with the gains file %r, with the folder %r" % (mode, with_file, with_dir))
            # the folder is whole: the config's ids and the tokenizer
            with open(os.path.join(out, "config.json")) as f:
                written = json.load(f)
            if (written.get("vocab_size"), written.get("bos_token_id"), written.get("eos_token_id")) != (2197, 0, 0):
                sys.exit("%s: config.json %r" % (mode, written))
            if "vocab_size 2197, bos_token_id 0, eos_token_id 0 taken from the tokenizer" not in stdout:
                sys.exit("%s: pretrain does not say what config.json took: %r" % (mode, stdout))
            with open(os.path.join(out, "tokenizer_config.json")) as f:
                tok_config = json.load(f)
            if (tok_config.get("eos_token"), tok_config.get("bos_token")) != ("<|endoftext|>",) * 2 or \
                    not os.path.exists(os.path.join(out, "tokenizer.json")):
                sys.exit("%s: the tokenizer files: %r" % (mode, tok_config))
            text, _ = run(exe, ["generate", "--model", out, "--adapter", gains, "--prompt", "The river",
                                "--max-new-tokens", "4"])
            if not text.strip() or not text.endswith("\n"):
                sys.exit("%s: generate --prompt on the folder: %r" % (mode, text))

        # a config folder without a tokenizer: the option that gives one named
        bare = os.path.join(tmp, "bare")
        os.mkdir(bare)
        with open(os.path.join(bare, "config.json"), "w") as f:
            f.write(CONFIG)
        _, err = run(exe, ["pretrain", "--config", bare, "--data", data, "--out", os.path.join(tmp, "bare-out")],
                     code=2)
        if "no tokenizer in %s" % bare not in err or "--tokenizer DIR" not in err:
            sys.exit("a config folder without a tokenizer: %r" % err)

        # gains that matter change what a model says (the fixture's random
        # GPT-2: a few pretraining steps only learn the commonest token)
        gpt2 = os.path.join(fixtures, "gpt2")
        plain, _ = run(exe, ["generate", "--model", gpt2] + GEN)
        strong = os.path.join(tmp, "strong.safetensors")
        write_gains(strong, [6.0, -0.9, 3.0, 9.0, -0.8, 12.0], 2, 3)
        gained, _ = run(exe, ["generate", "--model", gpt2, "--adapter", strong] + GEN)
        if ids_of(gained) == ids_of(plain):
            sys.exit("large gains left the tokens unchanged: %r" % gained)

        # refused: gains beside a prefix adapter; gains of another shape
        _, err = run(exe, ["generate", "--model", gpt2, "--adapter", strong, "--adapter",
                           os.path.join(gpt2, "adapter0")] + GEN, code=1)
        if "gains files and prefix adapters go into separate banks" not in err or strong not in err:
            sys.exit("a gains file beside a prefix adapter: %r" % err)
        _, err = run(exe, ["generate", "--model", os.path.join(tmp, "linear"), "--adapter", strong] + GEN, code=1)
        if "tensor gains is [2, 3], the model needs [L=2, H=4]" not in err or strong not in err:
            sys.exit("gains of another model: %r" % err)

if __name__ == "__main__":
    main()
