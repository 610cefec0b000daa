#!/usr/bin/env python3
"""`prefixcl export --fold-gains` on the tiny fixtures (tests/fixtures/models,
tests/fixtures/fold): the folder it writes holds the base model's weights
with the query columns of GPT-2's c_attn (weight and bias) scaled by 1 + g_h
and everything else unchanged, and the model's generation_config.json;
Llama structured gains that split a rotated pair are refused naming the
heads; missing options are refused naming them. (pfx_model_fold_gains
against transformers' logits: test_model_fold.)

usage: test_export_cli.py PREFIXCL FIXTURES_DIR   (standard library only)
"""
import json
import os
import struct
import sys
import tempfile

from cli_run import run


def read_st(path):
    """{name: (dtype, shape, list of floats)} of a float32 safetensors file."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + n])
    meta = head.pop("__metadata__", {})
    out = {}
    for name, t in head.items():
        a, b = t["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        if t["dtype"] != "F32":
            sys.exit("%s: %s is %s" % (path, name, t["dtype"]))
        out[name] = (t["shape"], struct.unpack("<%df" % (len(raw) // 4), raw))
    return out, meta


def write_st(path, tensors, meta):
    head, blob = {"__metadata__": meta}, b""
    for name, (shape, values) in tensors.items():
        raw = struct.pack("<%df" % len(values), *values)
        head[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(head).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def main():
    exe, fixtures = sys.argv[1:3]
    base = os.path.join(fixtures, "models", "gpt2")
    gains_path = os.path.join(fixtures, "fold", "gpt2", "linear.safetensors")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "folded")
        stdout, _ = run(exe, ["export", "--fold-gains", "--model", base, "--gains", gains_path, "--out", out])
        if "folded" not in stdout:
            sys.exit("stdout: %r" % stdout)
        if not os.path.exists(os.path.join(out, "generation_config.json")):
            sys.exit("no generation_config.json in %s" % os.listdir(out))
        cfg = json.load(open(os.path.join(base, "config.json")))
        C, H = cfg["n_embd"], cfg["n_head"]
        D = C // H
        g = read_st(gains_path)[0]["gains"][1]
        want, _ = read_st(os.path.join(base, "model.safetensors"))
        got, _ = read_st(os.path.join(out, "model.safetensors"))
        if sorted(want) != sorted(got):
            sys.exit("tensors %r, expected %r" % (sorted(got), sorted(want)))
        for name in want:
            shape, w = want[name]
            _, x = got[name]
            cols = shape[-1]
            layer = int(name.split(".")[2]) if ".attn.c_attn." in name else -1
            for i, (a, b) in enumerate(zip(w, x)):
                c = i % cols
                f = 1.0 + g[layer * H + c // D] if layer >= 0 and c < C else 1.0
                if abs(b - a * f) > 1e-6 * max(1.0, abs(a)):
                    sys.exit("%s[%d]: %r, expected %r x %r" % (name, i, b, a, f))

        # structured gains that split the pairs RoPE turns together
        llama = os.path.join(fixtures, "models", "llama")
        dim, meta = read_st(os.path.join(fixtures, "fold", "llama", "dim.safetensors"))
        shape, v = dim["dim_gains"]
        v = list(v)
        v[(1 * shape[1] + 2) * shape[2] + 1] += 0.25  # layer 1 head 2
        bad = os.path.join(tmp, "split.safetensors")
        write_st(bad, {"dim_gains": (shape, v)}, meta)
        _, err = run(exe, ["export", "--fold-gains", "--model", llama, "--gains", bad, "--out",
                           os.path.join(tmp, "o2")], code=2)
        if "layer 1 head 2" not in err:
            sys.exit("a split pair: %r" % err)
        for args, name in (([], "--fold-gains"), (["--fold-gains"], "--model"),
                           (["--fold-gains", "--model", base], "--gains"),
                           (["--fold-gains", "--model", base, "--gains", gains_path], "--out")):
            _, err = run(exe, ["export"] + args, code=2)
            if name not in err:
                sys.exit("%r: %r" % (args, err))
    print("ok")


if __name__ == "__main__":
    main()
