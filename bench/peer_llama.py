#!/usr/bin/env python3
"""llama.cpp peer of bench/bench_generate: the same GPT-2 small weights on both
engines, prompt 128, 32 new tokens, 2 threads each, float32, half and int8
(Q8_0).

    python3 bench/peer_llama.py prepare --llama-build DIR --work DIR
    python3 bench/peer_llama.py run --llama-build DIR --work DIR --prefixcl-build DIR
                                    [--rounds 2] [--runs 3] [--storage f32,f16,q8_0]
                                    [--kv-dtype f32|f16|bf16] [--json FILE]

prepare: a GPT2LMHeadModel of GPT-2 small's config (12 layers, 768 wide, 12
heads, vocab 50257, 1024 positions) with seeded random weights, saved by
transformers (safetensors) into WORK/gpt2-small with a byte-level BPE
tokenizer of 50257 entries (256 bytes, 50000 two-byte merges, <|endoftext|>):
the real GPT-2 vocabulary cannot be had offline, and neither engine reads text
here (both take random token ids). llama.cpp's convert_hf_to_gguf.py (from the
source folder the build was configured from) writes WORK/gpt2-small-f32.gguf,
-f16.gguf and -q8_0.gguf; the converter recognises a tokenizer by hashing how
it splits a test text, which only the real vocabulary matches, so it is told
the pre-tokenizer is GPT-2's (it is: GPT-2's byte-level split). Sampled
tensors of each GGUF are then checked against the folder's (equal; f16: equal
to them rounded to half; Q8_0: equal, block and value, to them quantized as
ggml's reference quantize_row_q8_0_ref does), and each GGUF's tensor types
are printed (the converter keeps norms, biases and the position embedding in
float32 whatever the outtype).

run: side by side, in turns A B B A per round (A: bench_generate --model
WORK/gpt2-small --no-adapter --batch 1,8; B: llama-bench -p 128 -n 32 -d 0,128
for batch 1, then llama-batched-bench -npp 128 -ntg 32 -npl 8 for batch 8),
each storage in turn. Batch 1 decode is llama-bench's tg32 at depth 128 (32
tokens after a 128-token context, as bench_generate decodes after its
prompt); prefill is pp128 at depth 0. Batch 8 has a distinct prompt per
sequence on both sides (no -pps). Figures: medians over the rounds of each
engine's own medians of --runs; ratios prefixcl / llama.cpp (above 1:
prefixcl faster); the 1-minute load average before and after each
measurement. Threads: llama.cpp -t 2; prefixcl with OPENBLAS_NUM_THREADS=2
(host BLAS and the few-row kernels' OpenMP team), OMP_NUM_THREADS=2 and
POCL_CPU_MAX_CU_COUNT=2 (PoCL's kernel threads).

The streaming floor: the bytes of the weights a batch-1 decode step reads once
(the 48 block products and the head: 123.5 M weights, 494.1 MB in float32,
half 2 bytes a weight, Q8_0 34 bytes a block of 32) over the machine's read
bandwidth, which bench_read_bw measures STREAM-style (every core reads its
slice of a 1 GiB buffer, four times the L3, the best of 7 passes): no kernel
under test reads faster, so neither engine can beat the floor. Each engine's
batch-1 decode step is printed beside it as a multiple.

Needs only the standard library to show --help; torch and transformers are
imported by prepare alone.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

THREADS = 2
PROMPT, NEW, BATCH = 128, 32, 8
VOCAB = 50257
# bytes per weight of each storage prefixcl's --storage and the GGUFs name;
# Q8_0: blocks of 32 int8 values and one half scale, 34 bytes
BYTES_PER_WEIGHT = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32}
QK8_0 = 32


def llama_source(build):
    """The source folder `build` was configured from (its CMakeCache.txt)."""
    cache = Path(build) / "CMakeCache.txt"
    for line in cache.read_text().splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return Path(line.split("=", 1)[1])
    sys.exit("%s names no source folder" % cache)


def byte_level_tokenizer(dir_model):
    """GPT-2's byte-level BPE with a made-up vocabulary of VOCAB entries."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2TokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    alphabet.sort()
    merges = [(a, b) for a in alphabet for b in alphabet][: VOCAB - 1 - len(alphabet)]
    vocab = {t: i for i, t in enumerate(alphabet + [a + b for a, b in merges])}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    eot = "<|endoftext|>"
    fast = GPT2TokenizerFast(tokenizer_object=tok, bos_token=eot, eos_token=eot, unk_token=eot)
    assert len(fast) == VOCAB, len(fast)
    fast.save_pretrained(dir_model)


def convert(src, dir_model, outtype, outfile):
    """convert_hf_to_gguf.py, told that the pre-tokenizer is GPT-2's."""
    code = (
        "import sys; sys.path[:0] = [%r, %r]\n"
        "import conversion.base as b\n"
        "b.TextModel.get_vocab_base_pre = lambda self, tokenizer: 'gpt-2'\n"
        "import convert_hf_to_gguf as c\n"
        "sys.argv = ['convert_hf_to_gguf.py', %r, '--outtype', %r, '--outfile', %r]\n"
        "c.main()\n" % (str(src), str(src / "gguf-py"), str(dir_model), outtype, str(outfile)))
    subprocess.run([sys.executable, "-c", code], check=True)


# the GGUFs prepare writes (convert_hf_to_gguf.py --outtype), one per storage
GGUF_TYPES = ("f32", "f16", "q8_0")

# GGUF tensor, folder tensor, stored transposed by the converter
SAMPLED = [("blk.0.attn_qkv.weight", "transformer.h.0.attn.c_attn.weight", True),
           ("blk.11.ffn_down.weight", "transformer.h.11.mlp.c_proj.weight", True),
           ("token_embd.weight", "transformer.wte.weight", False),
           ("blk.3.attn_norm.weight", "transformer.h.3.ln_1.weight", False),
           ("blk.6.attn_output.weight", "transformer.h.6.attn.c_proj.weight", True),
           ("blk.9.ffn_up.weight", "transformer.h.9.mlp.c_fc.weight", True),
           ("blk.5.ffn_up.bias", "transformer.h.5.mlp.c_fc.bias", False),
           ("position_embd.weight", "transformer.wpe.weight", False),
           ("output_norm.weight", "transformer.ln_f.weight", False)]


def q8_0_reference(w):
    """w [rows, k] float32 quantized as ggml's quantize_row_q8_0_ref: blocks of
    32 consecutive values along a row, d = amax / 127 in float, stored as half;
    q = roundf(x * (1 / d)) (the reciprocal of the float d, not of the half).
    Returns the half scales [blocks], the int8 values [blocks, 32] and the
    dequantized weights half(d) * q, shaped as w."""
    import numpy as np

    blocks = np.ascontiguousarray(w, dtype=np.float32).reshape(-1, QK8_0)
    d = np.abs(blocks).max(axis=1) / np.float32(127)
    inv = np.zeros_like(d)
    np.divide(np.float32(1), d, out=inv, where=d != 0)
    x = (blocks * inv[:, None]).astype(np.float64)  # the product in float, as C's
    q = (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(np.int8)  # roundf: halves away from 0
    dh = d.astype(np.float16)
    deq = (dh.astype(np.float32)[:, None] * q.astype(np.float32)).reshape(w.shape)
    return dh, q, deq


def tensor_types(path, reader):
    """The GGUF's tensor types, names grouped over the blocks (blk.*)."""
    groups = {}
    for t in reader.tensors:
        name = re.sub(r"^blk\.\d+\.", "blk.*.", t.name)
        groups.setdefault(t.tensor_type.name, {}).setdefault(name, 0)
        groups[t.tensor_type.name][name] += 1
    print("%s tensor types:" % path.name)
    for kind, names in sorted(groups.items()):
        print("  %s (%d tensors): %s" % (kind, sum(names.values()), ", ".join(
            "%s x%d" % (n, c) if c > 1 else n for n, c in names.items())))


def check_gguf(src, dir_model, path):
    """Sampled tensors of the GGUF against the folder's: equal (f16: to the
    folder's value rounded to half; Q8_0: block for block and value for value
    to q8_0_reference of it), so both engines run the same weights."""
    import numpy as np
    from safetensors.numpy import load_file

    sys.path.insert(0, str(src / "gguf-py"))
    import gguf

    folder = load_file(str(dir_model / "model.safetensors"))
    reader = gguf.GGUFReader(str(path))
    tensor_types(path, reader)
    tensors = {t.name: t for t in reader.tensors}
    kinds = gguf.GGMLQuantizationType
    for name, hf, transposed in SAMPLED:
        want = folder[hf].T if transposed else folder[hf]
        t = tensors[name]
        if t.tensor_type == kinds.Q8_0:
            dh, q, deq = q8_0_reference(want)
            raw = np.asarray(t.data).view(np.uint8).reshape(-1, 2 + QK8_0)
            got_d, got_q = raw[:, :2].copy().view(np.float16)[:, 0], raw[:, 2:].view(np.int8)
            got = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(want.shape)
            same = (np.array_equal(got_d.view(np.uint16), dh.view(np.uint16))
                    and np.array_equal(got_q, q) and np.array_equal(got, deq))
            if same:
                print("  %s: Q8_0 equal to the reference (%d blocks; max |w - deq| %.3g, "
                      "max |w| %.3g)" % (name, len(q), np.abs(want - deq).max(), np.abs(want).max()))
        else:
            if t.tensor_type == kinds.F16:
                want = want.astype(np.float16)
            got = np.asarray(t.data).reshape(want.shape)
            same = np.array_equal(got, want)
        if not same:
            sys.exit("%s: %s (%s) differs from %s's %s" % (path, name, t.tensor_type.name,
                                                         dir_model, hf))


def prepare(args):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    work = Path(args.work)
    dir_model = work / "gpt2-small"
    dir_model.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    model = GPT2LMHeadModel(GPT2Config()).eval()  # GPT-2 small's config, float32
    model.save_pretrained(dir_model, safe_serialization=True)
    # the converter reads n_ctx, which the released GPT-2's config.json carries and
    # transformers 5 no longer writes
    config = json.loads((dir_model / "config.json").read_text())
    config.setdefault("n_ctx", config["n_positions"])
    (dir_model / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    byte_level_tokenizer(dir_model)
    src = llama_source(args.llama_build)
    for outtype in GGUF_TYPES:
        convert(src, dir_model, outtype, work / ("gpt2-small-%s.gguf" % outtype))
        check_gguf(src, dir_model, work / ("gpt2-small-%s.gguf" % outtype))
    print("wrote %s and %s/gpt2-small-{%s}.gguf" % (dir_model, work, ",".join(GGUF_TYPES)))
    return 0


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def measured(cmd, env=None):
    """Runs cmd; its stdout, with the 1-minute load average before and after."""
    before = load1()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return out, (before, load1())


def prefixcl_env(threads=THREADS):
    """The environment that gives prefixcl `threads` threads: the host BLAS, the
    few-row kernels' OpenMP team and PoCL's kernel threads."""
    env = dict(os.environ)
    env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               POCL_CPU_MAX_CU_COUNT=str(threads))
    return env


def run_prefixcl(args, storage):
    js = Path(args.work) / ("bench_generate-%s.json" % storage)
    cmd = [str(Path(args.prefixcl_build) / "bench" / "bench_generate"), "--model",
           str(Path(args.work) / "gpt2-small"), "--no-adapter", "--batch", "1,%d" % BATCH,
           "--tokens", str(PROMPT), "--new", str(NEW), "--runs", str(args.runs), "--storage",
           storage, "--kv-dtype", args.kv_dtype, "--json", str(js)]
    out, load = measured(cmd, prefixcl_env())
    res = {r["batch"]: r for r in json.loads(js.read_text())["results"]}
    one, eight = res[1], res[BATCH]
    return {"prefill1": one["prefill_tokens_per_s"], "decode1": one["decode_tokens_per_s"],
            "prefill8": eight["prefill_tokens_per_s"], "decode8": eight["decode_tokens_per_s"],
            "step1_ms": 1e3 / one["decode_tokens_per_s"], "load": load, "out": out}


def run_llama(args, storage):
    gguf = str(Path(args.work) / ("gpt2-small-%s.gguf" % storage))
    bench = Path(args.llama_build) / "bin"
    out, load_a = measured([str(bench / "llama-bench"), "-m", gguf, "-p", str(PROMPT), "-n",
                            str(NEW), "-d", "0,%d" % PROMPT, "-t", str(THREADS), "-r",
                            str(args.runs), "-o", "json"])
    tests = json.loads(out)
    pick = {(t["n_prompt"], t["n_gen"], t["n_depth"]): t for t in tests}
    pp, tg = pick[(PROMPT, 0, 0)], pick[(0, NEW, PROMPT)]
    speeds = {"prefill8": [], "decode8": []}
    load_b = None
    for _ in range(args.runs):
        out, load = measured([str(bench / "llama-batched-bench"), "-m", gguf, "-c", "2048", "-b",
                              "2048", "-ub", "512", "-npp", str(PROMPT), "-ntg", str(NEW), "-npl",
                              str(BATCH), "-t", str(THREADS), "-tb", str(THREADS),
                              "--output-format", "jsonl"])
        load_b = (load_b[0] if load_b else load[0], load[1])
        row = [json.loads(l) for l in out.splitlines() if l.startswith("{")][-1]
        speeds["prefill8"].append(row["speed_pp"])
        speeds["decode8"].append(row["speed_tg"])
    # llama-bench's avg_ts is a mean over its repetitions: take the median of samples_ts
    return {"prefill1": statistics.median(pp["samples_ts"]),
            "decode1": statistics.median(tg["samples_ts"]),
            "prefill8": statistics.median(speeds["prefill8"]),
            "decode8": statistics.median(speeds["decode8"]),
            "step1_ms": 1e3 / statistics.median(tg["samples_ts"]),
            "load": (load_a[0], load_b[1]), "build": pp.get("build_commit", "?"),
            "cpu": pp.get("cpu_info", "?"), "flash_attn": pp.get("flash_attn", "?")}


# GPT-2 small's weights a decode step reads once: 12 blocks of c_attn 768x2304,
# attn.c_proj 768x768, c_fc 768x3072, mlp.c_proj 3072x768, and the tied head
# 50257x768
STEP_WEIGHTS = 12 * (768 * 2304 + 768 * 768 + 768 * 3072 + 3072 * 768) + VOCAB * 768


def read_floor(args):
    """bench_read_bw's read bandwidth (best of 7 passes over 1 GiB on every
    core): {gbs, line} with the load."""
    exe = Path(args.prefixcl_build) / "bench" / "bench_read_bw"
    out, load = measured([str(exe), "--passes", "7"])
    m = re.search(r"read bandwidth: ([\d.]+) GB/s", out)
    if not m:
        sys.exit("bench_read_bw printed no bandwidth:\n" + out)
    return {"gbs": float(m.group(1)), "line": out.strip(), "load": load}


def storage_floor(floor, storage):
    """The streaming floor of a batch-1 decode step in `storage`: its weight
    bytes over the read bandwidth. {mb, ms, gbs}."""
    mb = STEP_WEIGHTS * BYTES_PER_WEIGHT[storage] / 1e6
    return {"mb": mb, "ms": mb / floor["gbs"], "gbs": floor["gbs"]}


KEYS = [("prefill1", "batch 1 prefill"), ("decode1", "batch 1 decode"),
        ("prefill8", "batch 8 prefill"), ("decode8", "batch 8 decode")]


def run(args):
    storages = args.storage.split(",")
    for storage in storages:
        gguf = Path(args.work) / ("gpt2-small-%s.gguf" % storage)
        if storage not in BYTES_PER_WEIGHT or not gguf.exists():
            sys.exit("no %s (storages: %s; prepare writes the GGUFs)" % (gguf, ", ".join(GGUF_TYPES)))
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    floor = read_floor(args)
    print("%s; %s, load %.2f -> %.2f" % (started, floor["line"], *floor["load"]))
    report = {"started": started, "floor": floor, "storages": {}}
    for storage in storages:
        runs = {"prefixcl": [], "llama.cpp": []}
        for rnd in range(args.rounds):
            for who in ("prefixcl", "llama.cpp", "llama.cpp", "prefixcl"):
                r = run_prefixcl(args, storage) if who == "prefixcl" else run_llama(args, storage)
                runs[who].append(r)
                print("  %s %s round %d: %s, load %.2f -> %.2f" % (
                    storage, who, rnd + 1, ", ".join("%s %.1f" % (k, r[k]) for k, _ in KEYS),
                    *r["load"]), flush=True)
        med = {w: {k: statistics.median(r[k] for r in rs) for k, _ in KEYS + [("step1_ms", "")]}
               for w, rs in runs.items()}
        report["storages"][storage] = {"median": med, "runs": {
            w: [{k: v for k, v in r.items() if k != "out"} for r in rs] for w, rs in runs.items()}}
        sf = storage_floor(floor, storage)
        report["storages"][storage]["floor"] = sf
        fl = sf["ms"]
        print("\n%s (%d rounds A B B A, medians), tokens/s:" % (storage, args.rounds))
        print("| tokens/s | prefixcl | llama.cpp | ratio |")
        print("|---|---:|---:|---:|")
        for k, name in KEYS:
            a, b = med["prefixcl"][k], med["llama.cpp"][k]
            print("| %s | %.1f | %.1f | %.2f |" % (name, a, b, a / b))
        print("batch 1 decode step: prefixcl %.2f ms, llama.cpp %.2f ms; streaming floor %.2f ms "
              "(%.1f MB of weights / %.1f GB/s read) (%.2fx and %.2fx of it)\n" % (
                  med["prefixcl"]["step1_ms"], med["llama.cpp"]["step1_ms"], fl, sf["mb"],
                  sf["gbs"], med["prefixcl"]["step1_ms"] / fl, med["llama.cpp"]["step1_ms"] / fl))
        last = runs["llama.cpp"][-1]
        report["llama"] = {k: last[k] for k in ("build", "cpu", "flash_attn")}
        print("prefixcl's last bench_generate output:\n" + runs["prefixcl"][-1]["out"])
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="make the model folder and its GGUFs")
    p.add_argument("--llama-build", required=True, help="llama.cpp's cmake build folder")
    p.add_argument("--work", required=True, help="folder for the model and the GGUFs")
    p.add_argument("--seed", type=int, default=1234)
    r = sub.add_parser("run", help="measure both engines side by side")
    r.add_argument("--llama-build", required=True, help="llama.cpp's cmake build folder")
    r.add_argument("--work", required=True, help="the folder prepare wrote")
    r.add_argument("--prefixcl-build", default="build", help="prefixcl's meson build folder")
    r.add_argument("--rounds", type=int, default=2, help="rounds of A B B A (each engine twice a round)")
    r.add_argument("--runs", type=int, default=3, help="runs within each measurement")
    r.add_argument("--storage", default="f32,f16",
                   help="comma-separated, of f32, f16, q8_0 (each needs its GGUF)")
    r.add_argument("--kv-dtype", default="f32", choices=["f32", "f16", "bf16"],
                   help="prefixcl's KV cache (bench_generate --kv-dtype); f16 is llama.cpp's")
    r.add_argument("--json", help="write every figure here")
    args = ap.parse_args()
    return prepare(args) if args.command == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
