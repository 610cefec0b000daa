#!/usr/bin/env python3
"""`prefixcl attn-map` against the library: the map it writes (--csv) has rows
that sum to 1, zeros where a causal map hides keys, and the mean prefix mass
and entropy of its rows equal what pfx_attention_stats computes without the
map (the "library" figures the command prints). Tolerances come from
tests/tolerances.h.

With MODELS_DIR (tests/fixtures/models), the same checks of `attn-map
--model` on the tiny GPT-2 (with its PEFT adapter and a small BPE
tokenizer.json written here, the text's tokens on the picture's axes) and
Llama folders (--ids), and the arguments it refuses.

usage: check_attn_map.py PREFIXCL TOLERANCES_H OUT_DIR [MODELS_DIR [cairo|none]]
(none: a build without cairo, whose pictures must not be written)
"""
import csv
import json
import math
import os
import re
import struct
import subprocess
import sys


def tolerance(header, name):
    m = re.search(r"#define\s+%s\s+([0-9.eE+-]+)" % name, open(header).read())
    assert m, f"{name} not in {header}"
    return float(m.group(1))


def check(tool, out_dir, tol_probs, tol_stats, head, extra):
    path = os.path.join(out_dir, f"attn-map-check-{head}.csv")
    args = [tool, "attn-map", "--out", os.path.join(out_dir, f"attn-map-check-{head}.png"),
            "--csv", path, "--head", str(head), *extra]
    text = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    line = next(l for l in text.splitlines() if l.startswith(f"head {head} of"))
    m = re.search(r"mean prefix mass [0-9.]+ \(library ([0-9.]+)\), entropy [0-9.]+ "
                  r"\(library ([0-9.]+)\)", line)
    assert m, f"no library figures in: {line}"
    lib_mass, lib_entropy = float(m.group(1)), float(m.group(2))
    with open(path) as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    prefix = sum(1 for name in header[1:] if name.startswith("p"))
    n, keys = len(body), len(header) - 1
    mass = entropy = 0.0
    for i, row in enumerate(body):
        p = [float(v) for v in row[1:]]
        assert len(p) == keys, f"row {i}: {len(p)} values, header has {keys}"
        assert abs(sum(p) - 1.0) <= tol_probs * keys, f"row {i} sums to {sum(p)}"
        assert min(p) >= 0.0, f"row {i}: a negative probability"
        if "--causal" in extra:  # N == M here: input key k is hidden from query i < k
            hidden = [k for k in range(keys - prefix) if k > i and p[prefix + k] != 0.0]
            assert not hidden, f"row {i}: hidden keys {hidden} carry mass"
        mass += sum(p[:prefix])
        entropy -= sum(v * math.log(v) for v in p if v > 0)
    mass, entropy = mass / n, entropy / n
    print(f"head {head}: prefix mass {mass:.6f} vs library {lib_mass:.6f}, "
          f"entropy {entropy:.6f} vs library {lib_entropy:.6f}, {n} rows of {keys} keys")
    # the printed library figures carry 6 decimals
    assert abs(mass - lib_mass) <= tol_stats + 1e-6, "prefix mass differs from the library's"
    assert abs(entropy - lib_entropy) <= tol_stats * max(1.0, entropy) + 1e-6, \
        "entropy differs from the library's"


def tiny_tokenizer(folder):
    """A BPE over letters (ids below the tiny model's vocabulary of 101)."""
    vocab = {"[UNK]": 0}
    for c in "abcdefghijklmnopqrstuvwxyz":
        vocab[c] = len(vocab)
    merges = [["t", "h"], ["th", "e"], ["a", "t"], ["c", "at"], ["s", "at"]]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None,
           "decoder": None,
           "model": {"type": "BPE", "dropout": None, "unk_token": "[UNK]",
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": merges}}
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tok, f)


def byte_char(b):
    """GPT-2's byte-to-character table (ByteLevel)."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    if b in keep:
        return chr(b)
    return chr(256 + [x for x in range(256) if x not in keep].index(b))


def byte_tokenizer(folder, text):
    """Byte-level BPE whose tokens are the text's bytes, no merges: a character
    of two bytes is two tokens, neither of them a character."""
    vocab = {}
    for b in text.encode():
        vocab.setdefault(byte_char(b), len(vocab))
    level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None, "pre_tokenizer": level, "post_processor": None, "decoder": level,
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": []}}
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tok, f)


def linked_folder(out_dir, name, source, files):
    """out_dir/name with links to source's files (a tokenizer or gains of this script's go beside them)."""
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    for file in files:
        link = os.path.join(folder, file)
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(os.path.join(source, file)), link)
    return folder


def model_folder(out_dir, name, source):
    return linked_folder(out_dir, name, source, ("config.json", "model.safetensors"))


def gains_file(path, mode, ramp, gains):
    """prefixcl tune's gains.safetensors: layers.<l>.gain [H] float32."""
    header, blob = {"__metadata__": {"format": "prefixcl-gains-1", "gain_mode": mode,
                                     "gain_ramp": str(ramp)}}, b""
    for l, row in enumerate(gains):
        header[f"layers.{l}.gain"] = {"dtype": "F32", "shape": [len(row)],
                                      "data_offsets": [len(blob), len(blob) + 4 * len(row)]}
        blob += struct.pack(f"<{len(row)}f", *row)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob)


def adapter_with_gains(out_dir, name, adapter, mode, ramp, gains):
    folder = linked_folder(out_dir, name, adapter, ("adapter_config.json", "adapter_model.safetensors"))
    gains_file(os.path.join(folder, "gains.safetensors"), mode, ramp, gains)
    return folder


def prefix_mass(tool, args, head):
    text = subprocess.run([tool, "attn-map", *args], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"head %d of \d+: mean prefix mass ([0-9.]+)" % head, text).group(1))


def refused(tool, args, words):
    r = subprocess.run([tool, "attn-map", *args], capture_output=True, text=True)
    assert r.returncode != 0, f"{args} was accepted"
    for w in words:
        assert w in r.stderr, f"{args}: {w!r} not in {r.stderr!r}"


def picture(path, drawn):
    """The SVG's text; None in a build without cairo, which must not write it."""
    if not drawn:
        assert not os.path.exists(path), f"{path} drawn in a build without cairo"
        return None
    with open(path) as f:
        return f.read()


def check_models(tool, out_dir, models, tol_probs, tol_stats, drawn):
    gpt2, llama = os.path.join(models, "gpt2"), os.path.join(models, "llama")
    folder = model_folder(out_dir, "gpt2-tok", gpt2)
    tiny_tokenizer(folder)
    adapter = ["--adapter", os.path.join(gpt2, "adapter")]
    text = ["--text", "the cat sat on the mat"]
    check(tool, out_dir, tol_probs, tol_stats, 1,
          ["--model", folder, *adapter, *text, "--layer", "1", "--gain-mode", "tanh", "--gain", "0.8"])
    # the picture: the text's tokens on the axes, the gain in the title
    svg_path = os.path.join(out_dir, "attn-map-model.svg")
    subprocess.run([tool, "attn-map", "--model", folder, *adapter, *text, "--layer", "0", "--head", "3",
                    "--gain-mode", "linear", "--gain", "0.25", "--out", svg_path],
                   check=True, capture_output=True)
    svg = picture(svg_path, drawn)
    for label in ("the", "cat", "sat", "prefix", "head 3", "gain linear 0.25") if svg else ():
        assert label in svg, f"{label!r} not in the picture's text"
    # the learned gains beside the adapter (prefixcl tune's file) reach the map and the titles
    tuned = adapter_with_gains(out_dir, "adapter-gains", os.path.join(gpt2, "adapter"), "tanh", 0.5,
                               [[0.3, -0.7, 1.9, 0.1], [-1.2, 0.37, 2.5, -0.05]])
    with_gains = ["--model", folder, "--adapter", tuned, *text, "--layer", "1"]
    check(tool, out_dir, tol_probs, tol_stats, 1, with_gains)
    svg_path = os.path.join(out_dir, "attn-map-gains.svg")
    subprocess.run([tool, "attn-map", *with_gains, "--grid", "--out", svg_path], check=True, capture_output=True)
    svg = picture(svg_path, drawn)
    for label in ("head 1, gain tanh 0.37 (ramp 0.5)", "head 2, gain tanh 2.5 (ramp 0.5)") if svg else ():
        assert label in svg, f"{label!r} not in the picture's text"
    base = prefix_mass(tool, [*with_gains, "--head", "2", "--gain-mode", "off"], 2)
    gained = prefix_mass(tool, [*with_gains, "--head", "2"], 2)
    assert abs(base - gained) > 1e-3, f"the gains change nothing ({base} vs {gained})"
    misfit = adapter_with_gains(out_dir, "adapter-gains-3", os.path.join(gpt2, "adapter"), "linear", 1.0,
                                [[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]])
    refused(tool, ["--model", folder, "--adapter", misfit, *text, "--layer", "0", "--head", "0"],
            ["does not fit", "4 heads"])
    # tokens that are no text of their own (half a character, a newline) still label the axes
    bytes_dir, odd = model_folder(out_dir, "gpt2-bytes", gpt2), "d\u00e9j\u00e0\nvu"
    byte_tokenizer(bytes_dir, odd)
    svg_path = os.path.join(out_dir, "attn-map-bytes.svg")
    subprocess.run([tool, "attn-map", "--model", bytes_dir, "--text", odd, "--layer", "1", "--head", "0",
                    "--out", svg_path], check=True, capture_output=True)
    svg = picture(svg_path, drawn)
    if svg is not None:
        assert svg.count(">?<") == 2 * 4, "the halves of \u00e9 and \u00e0 are not labelled '?' on both axes"
        assert "gain off" in svg, "no gain in the title"
    check(tool, out_dir, tol_probs, tol_stats, 2,
          ["--model", llama, "--adapter", os.path.join(llama, "adapter"), "--ids", "5,90,1,33,7,7,64",
           "--layer", "1"])
    check(tool, out_dir, tol_probs, tol_stats, 0, ["--model", llama, "--ids", "12,3,80", "--layer", "0"])
    ids = ["--ids", "1,2,3"]
    refused(tool, ["--model", gpt2, "--text", "the cat", "--layer", "0", "--head", "0"], ["tokenizer", "--ids"])
    refused(tool, ["--model", folder, "--text", "", "--layer", "0", "--head", "0"], ["--text"])
    long_text = " ".join(["cat"] * 60)  # 60 tokens + 5 prefix > 64 positions
    refused(tool, ["--model", folder, *adapter, "--text", long_text, "--layer", "0", "--head", "0"], ["positions"])
    refused(tool, ["--model", gpt2, *ids, "--layer", "2", "--head", "0"], ["--layer 2"])
    refused(tool, ["--model", gpt2, *ids, "--layer", "1", "--head", "4"], ["--head 4"])
    refused(tool, ["--model", gpt2, "--ids", "1,101", "--layer", "1", "--head", "0"], ["--ids"])
    for bad in ("1,,2", ",1", "1,", "1, ,2"):  # one strict id-list parser (tools/common/cli.h)
        refused(tool, ["--model", gpt2, "--ids", bad, "--layer", "1", "--head", "0"], ["--ids"])
    refused(tool, ["--model", gpt2, *ids, "--layer", "1", "--head", "0", "--gain", " 0.5"], ["--gain"])
    refused(tool, ["--model", llama, *adapter, *ids, "--layer", "1", "--head", "0"], ["does not fit"])
    refused(tool, ["--model", gpt2, *ids, "--layer", "1"], ["--head or --grid"])
    # the outputs checked before the model loads
    refused(tool, ["--model", gpt2, *ids, "--layer", "1", "--head", "0", "--out", out_dir], ["--out", "is a folder"])
    same = os.path.join(out_dir, "same.png")
    refused(tool, ["--model", gpt2, *ids, "--layer", "1", "--head", "0", "--out", same, "--csv", same],
            ["--out and --csv name the same file"])
    print("attn-map --model: maps, picture and refusals as expected")


def main():
    tool, header, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    tol_probs, tol_stats = tolerance(header, "TOL_PROBS_F32"), tolerance(header, "TOL_STATS_F32")
    shape = ["--n", "19", "--m", "19", "--p", "7", "--d", "24", "--heads", "3", "--seed", "4"]
    check(tool, out_dir, tol_probs, tol_stats, 2, shape + ["--causal", "--gain", "0.7"])
    check(tool, out_dir, tol_probs, tol_stats, 0, shape + ["--gain-mode", "tanh", "--gain", "-0.9"])
    refused(tool, shape + ["--out", out_dir], ["--out", "is a folder"])  # checked before any work
    refused(tool, shape + ["--csv", out_dir], ["--csv", "is a folder"])
    if len(sys.argv) > 4:
        drawn = len(sys.argv) <= 5 or sys.argv[5] == "cairo"
        check_models(tool, out_dir, sys.argv[4], tol_probs, tol_stats, drawn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
