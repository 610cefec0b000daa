#!/usr/bin/env python3
"""One full-training step three ways on the same CPU, model, weights and
tokens: prefixcl (build/bench/bench_train), PyTorch + transformers
(bench/peer_train_torch.py) and llm.c's CPU trainer (train_gpt2.c, float32,
OpenMP, built here from a checkout of karpathy/llm.c).

It makes, under --work:
  * a Hugging Face GPT-2 folder of random weights (transformers' init from
    --seed, dropout 0): what prefixcl and PyTorch load;
  * the same weights in llm.c's checkpoint layout (a header of 256 int32:
    magic 20240326, version 3, max T, V, layers, heads, channels, padded V;
    then the float32 parameters in train_gpt2.py write_model's order, the
    Conv1D matrices transposed to (out, in); padded V = V: the CPU trainer
    needs no padding, and without it its LM head does the others' FLOPs);
  * one token shard in llm.c's layout (magic 20240520, version 1, uint16) of
    B * T + 1 random ids: the batch every step of every peer trains on (the
    first B rows of T; llm.c also reads the one token past them, its last
    target);
  * llm.c's train_gpt2.c built by its own Makefile (`make train_gpt2`: cc
    -Ofast -march=native -fopenmp -DOMP), its constants edited: B and T, the
    steps of the run, and its validation pass (outside its timed step) off.

Then rounds of the peers, A B C then C B A, each a fresh process of
--warmup + --steps steps, the machine's load average printed around each;
per peer the median wall time of a step over every round's steps after the
warm-up, its tokens/s, its model FLOPs utilization (6 N + 12 L T d FLOPs a
token, pfx_model_train_flops, over the FMA peak that prefixcl bench measures:
bench_train's, or --peak-gflops) and its first step's loss: prefixcl's and
PyTorch's must agree (the same weights and labels), llm.c's is checked
against its own definition (T targets a row, the last one the next row's
first token) computed by PyTorch on the same weights.

Every peer gets --threads threads: OMP_NUM_THREADS (llm.c, torch's
intra-op pool), torch.set_num_threads, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS
(prefixcl's host products) and POCL_MAX_PTHREAD_COUNT (prefixcl's kernels).

    python3 bench/peer_train_llmc.py --llmc-src DIR [--shape gpt2-128|gpt2-1024|small]
        [--batch B] [--tokens T] [--steps S] [--warmup W] [--rounds R] [--threads N]
        [--peers prefixcl,torch,llmc] [--peak-gflops X] [--build DIR] [--work DIR]
        [--json PATH]

Needs only the standard library to show --help; torch and transformers are
imported lazily.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CKPT_MAGIC, CKPT_VERSION = 20240326, 3
SHARD_MAGIC, SHARD_VERSION = 20240520, 1
HEADER_INTS = 256

# name: (config, default B, default T)
SHAPES = {
    "gpt2-128": (dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024), 8, 128),
    # B=8 at T=1024 needs 36 GiB for llm.c (its activations and their
    # gradients, the attention's two [B, H, T, T] of each layer among them):
    # 2 rows (10.4 GiB) fit a 24 GiB machine
    "gpt2-1024": (dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024), 2, 1024),
    # prefixcl experiment gain's defaults (tools/experiment/exp_cmd.c)
    "small": (dict(n_layer=4, n_head=4, n_embd=128, vocab_size=4096, n_positions=64), 16, 64),
}
PEERS = ("prefixcl", "torch", "llmc")
INCLUDES = {
    "prefixcl": "forward, loss (B (T-1) targets), backward to every weight, global clipping at 1.0, "
                "AdamW (lr 1e-4, weight decay 0.01 on every weight), the ids uploaded",
    "torch": "forward with labels (B (T-1) targets), backward, clip_grad_norm_(1.0), AdamW "
             "(lr 1e-4, weight decay 0.01, fused), zero_grad(set_to_none)",
    "llmc": "the batch read from the shard, forward, loss (B T targets), zeroing every weight "
            "and activation gradient, backward, AdamW (lr 1e-4, weight decay 0); no clipping",
}


def load_text():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def mem_available_bytes():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def llmc_bytes(cfg, B, T):
    """Host memory of llm.c's train_gpt2.c at B, T: parameters, their gradients
    and two moments, the activations and their gradients (its
    fill_in_parameter_sizes and fill_in_activation_sizes)."""
    L, C, NH, V, maxT = cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["vocab_size"], cfg["n_positions"]
    params = V * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
    acts = (B * T * C + L * B * T * (18 * C + 4) + 2 * L * B * NH * T * T
            + B * T * (C + 2) + 2 * B * T * V + B * T)
    return 4 * (4 * params + 2 * acts)


def make_model(work, name, cfg, seed):
    """work/name: a Hugging Face folder of transformers' random init (made once
    per config and seed)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = os.path.join(work, name)
    stamp = os.path.join(folder, "made.json")
    want = {"config": cfg, "seed": seed}
    try:
        with open(stamp) as f:
            if json.load(f) == want:
                return folder
    except (OSError, ValueError):
        pass
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **cfg))
    model.save_pretrained(folder, safe_serialization=True)
    write_llmc_checkpoint(model, os.path.join(folder, "llmc.bin"))
    with open(stamp, "w") as f:
        json.dump(want, f)
    return folder


def write_llmc_checkpoint(model, path):
    """The model's weights in llm.c's float32 checkpoint layout (version 3)."""
    import torch

    c = model.config
    sd = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    L = c.n_layer
    header = [0] * HEADER_INTS
    header[:8] = [CKPT_MAGIC, CKPT_VERSION, c.n_positions, c.vocab_size, L, c.n_head, c.n_embd, c.vocab_size]

    def block(name, transpose=False):
        ts = [sd["transformer.h.%d.%s" % (i, name)] for i in range(L)]
        return [t.t().contiguous() if transpose else t for t in ts]

    tensors = [sd["transformer.wte.weight"], sd["transformer.wpe.weight"]]
    for name, transpose in (("ln_1.weight", False), ("ln_1.bias", False),
                            ("attn.c_attn.weight", True), ("attn.c_attn.bias", False),
                            ("attn.c_proj.weight", True), ("attn.c_proj.bias", False),
                            ("ln_2.weight", False), ("ln_2.bias", False),
                            ("mlp.c_fc.weight", True), ("mlp.c_fc.bias", False),
                            ("mlp.c_proj.weight", True), ("mlp.c_proj.bias", False)):
        tensors += block(name, transpose)
    tensors += [sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<%di" % HEADER_INTS, *header))
        for t in tensors:
            f.write(t.numpy().astype("<f4").tobytes())
    os.replace(tmp, path)


def make_shard(work, vocab, B, T, seed):
    """work/tokens_V_B_T/tokens_000000.bin: B T + 1 uniform ids below vocab."""
    import random

    folder = os.path.join(work, "tokens_%d_%d_%d_%d" % (vocab, B, T, seed))
    path = os.path.join(folder, "tokens_000000.bin")
    if os.path.exists(path):
        return path
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(seed)
    n = B * T + 1
    header = [0] * HEADER_INTS
    header[:3] = [SHARD_MAGIC, SHARD_VERSION, n]
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<%di" % HEADER_INTS, *header))
        f.write(struct.pack("<%dH" % n, *(rng.randrange(vocab) for _ in range(n))))
    os.replace(path + ".tmp", path)
    return path


def reference_losses(folder, shard, B, T):
    """The first step's loss as prefixcl and PyTorch define it (labels = ids,
    B (T-1) targets) and as llm.c does (B T targets, from the shard's next
    tokens), from the loaded folder in float64."""
    import torch
    from transformers import GPT2LMHeadModel

    sys.path.insert(0, HERE)
    from peer_train_torch import read_shard_rows

    flat = [x for r in read_shard_rows(shard, 1, B * T + 1) for x in r]
    ids = torch.tensor(flat[:B * T], dtype=torch.long).view(B, T)
    nxt = torch.tensor(flat[1:B * T + 1], dtype=torch.long).view(B, T)
    model = GPT2LMHeadModel.from_pretrained(folder).double().eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    ce = torch.nn.functional.cross_entropy
    hf = ce(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1)).item()
    llmc = ce(logits.reshape(-1, logits.size(-1)), nxt.reshape(-1)).item()
    return hf, llmc


def build_llmc(src, work, B, T, nsteps):
    """train_gpt2 built by llm.c's Makefile from src, B, T and the run's steps
    edited in, its validation pass off; the folder it runs in."""
    folder = os.path.join(work, "llmc_B%d_T%d_S%d" % (B, T, nsteps))
    exe = os.path.join(folder, "train_gpt2")
    with open(os.path.join(src, "train_gpt2.c")) as f:
        code = f.read()
    edits = [
        ("int B = 4;", "int B = %d;" % B),
        ("int T = 64;", "int T = %d;" % T),
        ("for (int step = 0; step <= 40; step++) {", "for (int step = 0; step < %d; step++) {" % nsteps),
        # the validation loss (5 forward passes at step 0, outside the timed step)
        ("if (step % 10 == 0) {", "if (0 && step % 10 == 0) {"),
    ]
    for old, new in edits:
        if code.count(old) != 1:
            sys.exit("%s/train_gpt2.c: expected '%s' once (another llm.c revision?)" % (src, old))
        code = code.replace(old, new)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "train_gpt2.c")
    old_code = None
    if os.path.exists(path):
        with open(path) as f:
            old_code = f.read()
    if old_code != code or not os.path.exists(exe):
        with open(path, "w") as f:
            f.write(code)
        shutil.copy(os.path.join(src, "Makefile"), folder)
        if os.path.exists(os.path.join(folder, "llmc")):
            shutil.rmtree(os.path.join(folder, "llmc"))
        shutil.copytree(os.path.join(src, "llmc"), os.path.join(folder, "llmc"))
        r = subprocess.run(["make", "train_gpt2"], cwd=folder, capture_output=True, text=True)
        line = [x for x in r.stdout.splitlines() if "train_gpt2.c" in x]
        print("llm.c: %s" % (line[-1].strip() if line else "make train_gpt2"))
        if r.returncode != 0 or not os.path.exists(exe):
            sys.exit("llm.c: make train_gpt2 failed:\n" + r.stdout[-2000:] + r.stderr[-2000:])
    return folder


def link(target, name):
    if os.path.lexists(name):
        os.remove(name)
    os.makedirs(os.path.dirname(name) or ".", exist_ok=True)
    os.symlink(os.path.abspath(target), name)


def run(cmd, env, cwd=None, log=None):
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if log:
        with open(log, "w") as f:
            f.write("$ %s\n%s\n%s" % (" ".join(cmd), r.stdout, r.stderr))
    if r.returncode != 0:
        sys.exit("%s failed (exit %d):\n%s%s" % (cmd[0], r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
    return r.stdout, wall


def run_prefixcl(a, folder, shard, env, out, log):
    cmd = [os.path.join(a.build, "bench", "bench_train"), "--model", folder, "--data", shard,
           "--batch", str(a.batch), "--tokens", str(a.tokens), "--steps", str(a.steps),
           "--warmup", str(a.warmup), "--json", out]
    if a.device:
        cmd += ["--device", a.device]
    if a.peak_gflops:
        cmd += ["--peak-gflops", "%g" % a.peak_gflops]
    _, wall = run(cmd, env, log=log)
    with open(out) as f:
        j = json.load(f)
    return j["step_ms_each"], j["first_loss"], wall, j


def run_torch(a, folder, shard, env, out, log):
    cmd = [sys.executable, os.path.join(HERE, "peer_train_torch.py"), "--model", folder, "--data", shard,
           "--batch", str(a.batch), "--tokens", str(a.tokens), "--steps", str(a.steps),
           "--warmup", str(a.warmup), "--threads", str(a.threads), "--out", out]
    _, wall = run(cmd, env, log=log)
    with open(out) as f:
        j = json.load(f)
    return j["step_ms_each"], j["first_loss"], wall, j


STEP_RE = re.compile(r"^step (\d+): train loss ([-+0-9.naif]+) \(took ([0-9.]+) ms\)$", re.M)


def run_llmc(a, llmc_dir, env, log):
    stdout, wall = run(["./train_gpt2"], env, cwd=llmc_dir, log=log)
    steps = [(int(s), float(l), float(ms)) for s, l, ms in STEP_RE.findall(stdout)]
    if len(steps) != a.warmup + a.steps:
        sys.exit("llm.c: %d step lines, expected %d (see %s)" % (len(steps), a.warmup + a.steps, log))
    return [ms for s, _, ms in steps if s >= a.warmup], steps[0][1], wall, None


def spread(xs):
    xs = sorted(xs)
    return "%.1f-%.1f" % (xs[0], xs[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llmc-src", help="a checkout of github.com/karpathy/llm.c (needed with the llmc peer)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="gpt2-128",
                    help="GPT-2 small at T=128 (B=8) or T=1024 (B=2), or the experiment's small model "
                         "(4 layers of 128, 4 heads, vocabulary 4096; B=16, T=64)")
    ap.add_argument("--batch", type=int, help="rows a step (default: the shape's)")
    ap.add_argument("--tokens", type=int, help="T, tokens a row (default: the shape's)")
    ap.add_argument("--steps", type=int, default=3, help="measured steps a run")
    ap.add_argument("--warmup", type=int, default=1, help="steps a run before those")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, A B C then C B A")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads of every peer")
    ap.add_argument("--peers", default=",".join(PEERS), help="which of prefixcl,torch,llmc, in round order")
    ap.add_argument("--peak-gflops", type=float, default=0.0,
                    help="the FMA peak for the MFU (prefixcl bench's peak.fma); default: measured by "
                         "the first bench_train run and given to the others")
    ap.add_argument("--device", help="bench_train's --device")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"),
                    help="prefixcl's build folder (bench/bench_train in it)")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "pfx-train-peers"),
                    help="where the weights, tokens, llm.c's build and the logs go")
    ap.add_argument("--seed", type=int, default=1234, help="the weights' and the tokens' seed")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()

    cfg, dB, dT = SHAPES[a.shape]
    a.batch = a.batch or dB
    a.tokens = a.tokens or dT
    peers = [p for p in a.peers.split(",") if p]
    if not peers or any(p not in PEERS for p in peers) or len(set(peers)) != len(peers):
        ap.error("--peers: a list of prefixcl, torch, llmc")
    if "llmc" in peers and not (a.llmc_src and os.path.exists(os.path.join(a.llmc_src, "train_gpt2.c"))):
        ap.error("--llmc-src: a checkout of karpathy/llm.c (train_gpt2.c) is needed with the llmc peer")
    if "prefixcl" in peers and not os.access(os.path.join(a.build, "bench", "bench_train"), os.X_OK):
        ap.error("--build %s: no bench/bench_train (meson compile -C %s)" % (a.build, a.build))
    if not (2 <= a.tokens <= cfg["n_positions"]) or a.batch < 1:
        ap.error("--tokens from 2 to %d, --batch at least 1" % cfg["n_positions"])
    if a.steps < 1 or a.warmup < 0 or a.rounds < 1 or a.threads < 1:
        ap.error("--steps, --rounds and --threads at least 1, --warmup at least 0")
    if "llmc" in peers:
        need, avail = llmc_bytes(cfg, a.batch, a.tokens), mem_available_bytes()
        print("llm.c needs %.1f GiB at B=%d T=%d (%.1f GiB available)" %
              (need / 2**30, a.batch, a.tokens, (avail or 0) / 2**30))
        if avail is not None and need > 0.9 * avail:
            sys.exit("llm.c would not fit: give a smaller --batch")

    os.makedirs(a.work, exist_ok=True)
    name = "%s_%dx%d_v%d_p%d" % ("gpt2", cfg["n_layer"], cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"])
    folder = make_model(a.work, name, cfg, a.seed)
    shard = make_shard(a.work, cfg["vocab_size"], a.batch, a.tokens, a.seed)
    ref_hf, ref_llmc = reference_losses(folder, shard, a.batch, a.tokens)
    llmc_dir = None
    if "llmc" in peers:
        llmc_dir = build_llmc(a.llmc_src, a.work, a.batch, a.tokens, a.warmup + a.steps)
        link(os.path.join(folder, "llmc.bin"), os.path.join(llmc_dir, "gpt2_124M.bin"))
        for part in ("train", "val"):
            link(shard, os.path.join(llmc_dir, "dev/data/tinyshakespeare/tiny_shakespeare_%s.bin" % part))

    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "POCL_MAX_PTHREAD_COUNT"):
        env[k] = str(a.threads)
    print("model: %s, B=%d T=%d, %d warm-up + %d steps a run, %d rounds, %d threads a peer" %
          (folder, a.batch, a.tokens, a.warmup, a.steps, a.rounds, a.threads))
    print("shard: %s" % shard)
    times = {p: [] for p in peers}
    first = {p: None for p in peers}
    walls = {p: [] for p in peers}
    loads = []
    flops = peak = None
    opt_ms = []  # prefixcl's optimizer part (clipping + AdamW), a median a run
    logs = os.path.join(a.work, "logs")
    os.makedirs(logs, exist_ok=True)
    for rnd in range(a.rounds):
        order = peers if rnd % 2 == 0 else peers[::-1]
        for p in order:
            before = load_text()
            log = os.path.join(logs, "%s_%s_round%d.log" % (a.shape, p, rnd + 1))
            out = os.path.join(logs, "%s_%s_round%d.json" % (a.shape, p, rnd + 1))
            if p == "prefixcl":
                ms, loss, wall, j = run_prefixcl(a, folder, shard, env, out, log)
                flops = j["flops_per_token"]
                opt_ms.append(j["optimizer_ms"])
                if not a.peak_gflops:
                    a.peak_gflops = peak = j["peak_gflops"]
                    print("FMA peak: %.1f GFLOP/s (bench_train's measure, given to the other runs)" % peak)
            elif p == "torch":
                ms, loss, wall, _ = run_torch(a, folder, shard, env, out, log)
            else:
                ms, loss, wall, _ = run_llmc(a, llmc_dir, env, log)
            after = load_text()
            loads += [before, after]
            times[p] += ms
            walls[p].append(wall)
            first[p] = loss
            print("round %d %-8s steps ms %s  first loss %.6f  run %.0f s  load %s -> %s" %
                  (rnd + 1, p, " ".join("%.1f" % x for x in ms), loss, wall, before, after))
            sys.stdout.flush()

    # the FLOPs of a token as pfx_model_train_flops counts them, when no
    # bench_train run said it: 6 N + 12 L T d (N: the weights, wte once)
    if flops is None:
        L, C, V, P = cfg["n_layer"], cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
        n = V * C + P * C + L * (12 * C * C + 13 * C) + 2 * C
        flops = 6.0 * n + 12.0 * L * a.tokens * C
    peak = a.peak_gflops or None
    tok = a.batch * a.tokens
    print()
    print("%s, B=%d T=%d, %.4g FLOPs a token, FMA peak %s, %d threads each" %
          (a.shape, a.batch, a.tokens, flops, "%.1f GFLOP/s" % peak if peak else "unknown (no MFU)",
           a.threads))
    ones = [float(x.split()[0]) for x in loads if x != "?"]
    if ones:
        print("load average (1 min) before and after the runs: %.2f to %.2f (the peers' own %d threads "
              "included)" % (min(ones), max(ones), a.threads))
    print("%-9s %10s %16s %10s %7s %11s %12s" % ("peer", "step ms", "min-max (n)", "tokens/s", "MFU %",
                                                  "first loss", "/ prefixcl"))
    base = statistics.median(times["prefixcl"]) if "prefixcl" in times else None
    result = {"shape": a.shape, "batch": a.batch, "tokens": a.tokens, "threads": a.threads,
              "flops_per_token": flops, "peak_gflops": peak, "loads": loads, "peers": {}}
    for p in peers:
        med = statistics.median(times[p])
        mfu = 100.0 * tok / (med / 1e3) * flops / (peak * 1e9) if peak else float("nan")
        rel = "%.2f" % (med / base) if base else "-"
        print("%-9s %10.1f %16s %10.0f %7.1f %11.6f %12s" %
              (p, med, "%s (%d)" % (spread(times[p]), len(times[p])), tok / (med / 1e3), mfu, first[p], rel))
        result["peers"][p] = {"step_ms": med, "step_ms_each": times[p], "tokens_per_s": tok / (med / 1e3),
                              "mfu": mfu / 100.0 if peak else None, "first_loss": first[p], "run_s": walls[p],
                              "includes": INCLUDES[p]}
    if base:
        print("/ prefixcl: the peer's median step over prefixcl's (above 1: prefixcl faster)")
    if opt_ms:
        print("prefixcl's clipping + AdamW: %.1f ms of its step (median of the runs' medians)" %
              statistics.median(opt_ms))
        result["peers"]["prefixcl"]["optimizer_ms"] = statistics.median(opt_ms)
    print()
    print("first loss against PyTorch's float64 forward of the same weights:")
    checks = []
    for p in peers:
        ref = ref_llmc if p == "llmc" else ref_hf
        rel = abs(first[p] - ref) / abs(ref)
        ok = rel < 1e-4
        checks.append(ok)
        print("  %-8s %.6f against %.6f (%s): %.1e %s" %
              (p, first[p], ref, "B T targets" if p == "llmc" else "B (T-1) targets", rel,
               "agrees" if ok else "DIFFERS"))
    print("each step:")
    for p in peers:
        print("  %-8s %s" % (p, INCLUDES[p]))
    result["reference_loss"] = {"labels": ref_hf, "llmc": ref_llmc}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
