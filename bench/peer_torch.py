#!/usr/bin/env python3
"""Side by side: PyTorch on the CPU and prefixcl on the same shapes.

For every test group the two sides run interleaved, A B B A per round (torch,
prefixcl, prefixcl, torch), so a change of machine load hits both sides
alike; each side's figure is the mean of its medians. prefixcl runs as
`prefixcl bench --only IDS --json FILE` (its own warm-up, calibrated run count
and median); torch runs in this process with torch.set_num_threads(--threads).
The 1-minute load average (/proc/loadavg) is read around every measurement
and reported; --wait-load L waits (up to --max-wait s) for a quieter machine
before each group.

torch uses the fastest formulation that computes exactly what prefixcl
computes:
  attention  scaled_dot_product_attention in float32 on [Kp ; K], [Vp ; V]
             (the prefix concatenated once, outside the timed region, as a
             prefix-tuned model holds it in its cache); causal (b) as
             is_causal with P zero query rows prepended (row P+i then sees the
             prefix and inputs 0..i, exactly the contract's visibility; those
             rows are dropped); decode (d) with enable_gqa=True when this torch
             accepts it (probed by calling it), else repeat_interleave of K/V
             outside the timed region. Backward = (forward + backward) -
             forward, medians.
  sgemm.N    torch.mm of N x N float32 matrices into a preallocated output.
  layer.step one training step of a GPT-2-small attention layer as prefixcl's
             layer.step: Q/K/V projections with bias, per-head tanh gain on
             the queries, the prefix [H, P, D] in front of K and V, causal
             attention (zero query rows as above), output projection, residual,
             MSE loss, backward to X, the prefix and the gains (weights frozen),
             gradient clipping at norm 1 and AdamW on the prefix and gains.

The ratio column is torch ms / prefixcl ms: above 1, prefixcl is faster.

    /work/refenv/bin/python bench/peer_torch.py [--prefixcl build/tools/prefixcl]
        [--device SEL] [--rounds 1] [--quick] [--threads 2] [--groups a,b,c,d,sgemm,layer]
        [--wait-load L --max-wait S] [--json OUT]

--help needs only the standard library; torch is imported when measuring.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ATTN_SHAPES = {
    # tag: B, H, Hkv, N, M, P, D, causal
    "a": (1, 8, 8, 1024, 1024, 32, 64, False),
    "b": (1, 8, 8, 1024, 1024, 32, 64, True),
    "c": (4, 16, 16, 2048, 2048, 64, 64, False),
    "d": (8, 32, 8, 1, 8192, 64, 128, False),
}
SGEMM_SIZES = (512, 1024, 2048)
# prefixcl's layer.step (tools/benchmark/bench_suite.c: STEP_*)
STEP = dict(B=2, N=512, C=768, H=12, D=64, P=20)
GROUPS = ("a", "b", "c", "d", "sgemm", "layer")


def group_tests(group):
    """prefixcl bench test ids of a group."""
    if group in ATTN_SHAPES:
        return ["attn_fwd." + group, "attn_bwd." + group]
    if group == "sgemm":
        return ["sgemm.%d" % n for n in SGEMM_SIZES]
    return ["layer.step"]


def loadavg():
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


# ---------------------------------------------------------------- prefixcl side

def run_prefixcl(exe, ids, device, quick):
    """{id: (median ms or None, reason)} and the device name, from one bench run."""
    fd, path = tempfile.mkstemp(prefix="peer-prefixcl-", suffix=".json")
    os.close(fd)
    os.remove(path)  # prefixcl writes it atomically
    cmd = [exe, "bench", "--only", ",".join(ids), "--json", path]
    if quick:
        cmd.append("--quick")
    if device:
        cmd += ["--device", device]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=1800, check=False)
        if proc.returncode != 0 or not os.path.exists(path):
            raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), proc.returncode,
                                                     proc.stderr.strip()[-400:]))
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
    finally:
        if os.path.exists(path):
            os.remove(path)
    dev = run["devices"][0]
    name = "%s; GEMM %s, CLBlast tuning %s" % (dev.get("name", "?"), dev.get("gemm_backend", "?"),
                                              dev.get("gemm_tuning", "?"))
    out = {}
    for t in dev.get("tests", []):
        if t.get("status") == "ok":
            out[t["id"]] = (t.get("median_ms"), "")
        else:
            out[t["id"]] = (None, t.get("reason", "skipped"))
    return out, name


# ---------------------------------------------------------------- torch side

class Torch:
    def __init__(self, threads, quick):
        import torch  # lazily: --help works without torch
        import torch.nn.functional as F
        self.torch, self.F = torch, F
        torch.set_num_threads(threads)
        self.target = 0.2 if quick else 1.0
        self.gen = torch.Generator().manual_seed(1)
        self.gqa = self._probe_gqa()

    def _probe_gqa(self):
        """enable_gqa by calling it: inspect.signature fails on the builtin."""
        torch, F = self.torch, self.F
        q = torch.zeros(1, 2, 1, 4)
        k = torch.zeros(1, 1, 3, 4)
        try:
            F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
            return True
        except (TypeError, RuntimeError):
            return False

    def randn(self, *shape):
        return self.torch.randn(*shape, generator=self.gen)

    def timed(self, fn, min_runs=3, max_runs=200):
        """Median ms of calibrated runs after one warm-up."""
        fn()
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
        times = [first]
        n = max(min_runs, min(max_runs, int(self.target / max(first, 1e-6))))
        for _ in range(n - 1):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    def attention(self, tag):
        """(forward ms, backward ms) of shape tag."""
        torch, F = self.torch, self.F
        B, H, Hkv, N, M, P, D, causal = ATTN_SHAPES[tag]
        q = self.randn(B, H, N, D)
        kk = torch.cat([self.randn(Hkv, P, D).expand(B, Hkv, P, D), self.randn(B, Hkv, M, D)], 2)
        vv = torch.cat([self.randn(Hkv, P, D).expand(B, Hkv, P, D), self.randn(B, Hkv, M, D)], 2)
        kw = {}
        if H != Hkv:
            if self.gqa:
                kw["enable_gqa"] = True
            else:
                kk = kk.repeat_interleave(H // Hkv, dim=1)
                vv = vv.repeat_interleave(H // Hkv, dim=1)
        rows = 0
        if causal:
            if N != M:
                raise ValueError("the zero-row causal form needs N == M")
            q = torch.cat([q.new_zeros(B, H, P, D), q], 2)
            kw["is_causal"] = True
            rows = P
        q.requires_grad_(True)
        kk = kk.contiguous().requires_grad_(True)
        vv = vv.contiguous().requires_grad_(True)
        do = self.randn(B, H, N, D)

        def fwd():
            with torch.no_grad():
                return F.scaled_dot_product_attention(q, kk, vv, **kw)[:, :, rows:]

        def fwd_bwd():
            o = F.scaled_dot_product_attention(q, kk, vv, **kw)[:, :, rows:]
            o.backward(do)
            q.grad = kk.grad = vv.grad = None

        ms_f = self.timed(fwd)
        ms_fb = self.timed(fwd_bwd)
        return ms_f, max(ms_fb - ms_f, 1e-6)

    def sgemm(self, n):
        a, b = self.randn(n, n), self.randn(n, n)
        c = self.torch.empty(n, n)
        return self.timed(lambda: self.torch.mm(a, b, out=c))

    def layer_step(self):
        torch, F = self.torch, self.F
        B, N, C, H, D, P = (STEP[k] for k in ("B", "N", "C", "H", "D", "P"))
        HD = H * D
        x = self.randn(B, N, C).requires_grad_(True)
        target = self.randn(B, N, C)
        w = [self.randn(HD, C) / C ** 0.5 for _ in range(3)] + [self.randn(C, HD) / HD ** 0.5]
        bias = [self.randn(HD) * 0.02 for _ in range(3)] + [self.randn(C) * 0.02]
        pk = (self.randn(H, P, D) * 0.1).requires_grad_(True)
        pv = (self.randn(H, P, D) * 0.1).requires_grad_(True)
        g = (self.randn(H) * 0.1).requires_grad_(True)
        opt = torch.optim.AdamW([pk, pv, g], lr=1e-3)

        def heads(t):
            return t.view(B, N, H, D).transpose(1, 2)

        def step():
            opt.zero_grad(set_to_none=True)
            x.grad = None
            q = heads(F.linear(x, w[0], bias[0])) * (1 + torch.tanh(g)).view(1, H, 1, 1)
            k = torch.cat([pk.expand(B, H, P, D), heads(F.linear(x, w[1], bias[1]))], 2)
            v = torch.cat([pv.expand(B, H, P, D), heads(F.linear(x, w[2], bias[2]))], 2)
            q = torch.cat([q.new_zeros(B, H, P, D), q], 2)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)[:, :, P:]
            y = F.linear(o.transpose(1, 2).reshape(B, N, HD), w[3], bias[3]) + x
            loss = F.mse_loss(y, target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([pk, pv, g], 1.0)
            opt.step()

        return self.timed(step)

    def group(self, group):
        """{test id: ms}."""
        if group in ATTN_SHAPES:
            f, b = self.attention(group)
            return {"attn_fwd." + group: f, "attn_bwd." + group: b}
        if group == "sgemm":
            return {"sgemm.%d" % n: self.sgemm(n) for n in SGEMM_SIZES}
        return {"layer.step": self.layer_step()}


# ---------------------------------------------------------------- runner

def wait_quiet(limit, max_wait):
    if limit is None:
        return
    t0 = time.time()
    while loadavg() > limit and time.time() - t0 < max_wait:
        time.sleep(5)


def main():
    ap = argparse.ArgumentParser(
        description="torch (CPU) and prefixcl side by side on the same shapes, interleaved "
        "A B B A, with the load seen and the ratio table.")
    ap.add_argument("--prefixcl", default="build/tools/prefixcl", help="the prefixcl tool")
    ap.add_argument("--device", default=None, help="prefixcl's --device selector (default: its default)")
    ap.add_argument("--rounds", type=int, default=1, help="A B B A rounds per group (default 1)")
    ap.add_argument("--quick", action="store_true", help="0.2 s of timed runs per test on both sides, not 1 s")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--groups", default=",".join(GROUPS),
                    help="comma-separated: attention shapes a-d, sgemm, layer (default all)")
    ap.add_argument("--wait-load", type=float, default=None,
                    help="before each group, wait until the 1-min load average is at most this")
    ap.add_argument("--max-wait", type=float, default=600, help="longest wait per group, s (default 600)")
    ap.add_argument("--json", default=None, help="also write the table as JSON here")
    args = ap.parse_args()

    groups = [g for g in args.groups.split(",") if g]
    bad = [g for g in groups if g not in GROUPS]
    if bad or args.rounds < 1 or args.threads < 1:
        ap.error("unknown group(s) %s (known: %s)" % (",".join(bad), ",".join(GROUPS)) if bad
                 else "--rounds and --threads must be >= 1")
    if not os.access(args.prefixcl, os.X_OK):
        print("peer_torch.py: %s is not an executable prefixcl tool (build it, or --prefixcl)"
              % args.prefixcl, file=sys.stderr)
        return 2
    try:
        peer = Torch(args.threads, args.quick)
    except ImportError:
        print("peer_torch.py: PyTorch is not installed for %s" % sys.executable, file=sys.stderr)
        return 2

    torch_ms, pfx_ms, reasons, loads = {}, {}, {}, []
    device_name = "?"
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for group in groups:
        wait_quiet(args.wait_load, args.max_wait)
        ids = group_tests(group)
        for _ in range(args.rounds):
            for side in ("torch", "prefixcl", "prefixcl", "torch"):
                before = loadavg()
                if side == "torch":
                    for tid, ms in peer.group(group).items():
                        torch_ms.setdefault(tid, []).append(ms)
                else:
                    try:
                        got, device_name = run_prefixcl(args.prefixcl, ids, args.device, args.quick)
                    except (RuntimeError, OSError, ValueError, KeyError, IndexError,
                            subprocess.TimeoutExpired) as e:
                        print("peer_torch.py: %s" % e, file=sys.stderr)
                        return 1
                    for tid in ids:
                        ms, why = got.get(tid, (None, "not run"))
                        if ms is None:
                            reasons[tid] = why
                        else:
                            pfx_ms.setdefault(tid, []).append(ms)
                loads.append((group, side, before, loadavg()))
                print("  %-6s %-9s load %.2f -> %.2f" % (group, side, loads[-1][2], loads[-1][3]),
                      file=sys.stderr)

    import torch
    seen = [x for _, _, a, b in loads for x in (a, b)]
    print("prefixcl (%s) vs torch %s on the CPU (%d threads), %s" %
          (device_name, torch.__version__, args.threads, started))
    print("interleaved A B B A, %d round(s) per group%s; enable_gqa %s" %
          (args.rounds, ", --quick" if args.quick else "", "used" if peer.gqa else "unavailable"))
    print("machine load seen (1-min average): min %.2f, max %.2f over %d measurements" %
          (min(seen), max(seen), len(loads)))
    print()
    print("  %-12s %14s %12s %12s" % ("test", "prefixcl (ms)", "torch (ms)", "torch/prefixcl"))
    rows = []
    for group in groups:
        for tid in group_tests(group):
            t = statistics.mean(torch_ms[tid]) if tid in torch_ms else None
            p = statistics.mean(pfx_ms[tid]) if tid in pfx_ms else None
            ratio = t / p if (t and p) else None
            rows.append({"id": tid, "prefixcl_ms": p, "torch_ms": t, "ratio": ratio,
                         "prefixcl_runs_ms": pfx_ms.get(tid, []), "torch_runs_ms": torch_ms.get(tid, []),
                         "skipped": reasons.get(tid) if p is None else None})
            print("  %-12s %14s %12s %12s" % (
                tid, "%.3f" % p if p is not None else "skipped",
                "%.3f" % t if t is not None else "-",
                "%.2f" % ratio if ratio is not None else "-"))
    for r in rows:
        if r["skipped"]:
            print("  %s: prefixcl skipped it: %s" % (r["id"], r["skipped"]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"tool": "peer_torch.py", "date": started, "prefixcl_device": device_name,
                       "torch": torch.__version__, "threads": args.threads, "rounds": args.rounds,
                       "quick": args.quick, "enable_gqa": peer.gqa,
                       "load": [{"group": g, "side": s, "before": a, "after": b}
                                for g, s, a, b in loads],
                       "tests": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
