#!/usr/bin/env python3
"""PyTorch peer of `prefixcl bench`: the attention shapes (a)-(d) through
torch.nn.functional.scaled_dot_product_attention in float32, forward and
backward, printed beside prefixcl's figures from a JSON run with the ratio.

Keys and values are the prefix concatenated with the input ([Kp ; K], as the
prefixcl contract defines them); the concatenation is done once, outside the
timed region. Causal (b) uses an explicit boolean mask that keeps the prefix
visible and aligns the input part bottom-right. Decode (d) is grouped-query
attention (H=32 over Hkv=8): enable_gqa where torch has it, else
repeat_interleave of K/V outside the timed region.

FLOPs are counted as prefixcl counts them: forward 4*B*H*N*(P+M)*D over the
visible pairs, backward 2.5x that; decode also as GB/s of K/V read (forward)
and K/V read + dK/dV written (backward). Backward time = (forward + backward)
minus forward, medians of timed runs after warm-up.

    python3 bench/peer_torch.py --json run.json [--device cuda|cpu] [--quick]

Needs only the standard library to show --help; torch is imported lazily.
"""
import argparse
import json
import statistics
import sys
import time

SHAPES = [
    # tag, B, H, Hkv, N, M, P, D, causal, decode
    ("a", 1, 8, 8, 1024, 1024, 32, 64, False, False),
    ("b", 1, 8, 8, 1024, 1024, 32, 64, True, False),
    ("c", 4, 16, 16, 2048, 2048, 64, 64, False, False),
    ("d", 8, 32, 8, 1, 8192, 64, 128, False, True),
]


def visible_pairs(B, H, N, M, P, causal):
    if not causal:
        return B * H * N * (P + M)
    total = 0
    for i in range(N):
        last = i + M - N
        total += P + min(last + 1, M)
    return B * H * total


def load_prefixcl(path):
    """{test id: (value, unit, ms)} per device name, from a prefixcl JSON run."""
    with open(path, encoding="utf-8") as f:
        run = json.load(f)
    if run.get("tool") != "prefixcl bench":
        raise ValueError(f"{path}: not a prefixcl bench JSON run")
    devices = []
    for dev in run.get("devices", []):
        tests = {}
        for t in dev.get("tests", []):
            if t.get("status") != "ok":
                tests[t["id"]] = None
                continue
            unit = "GB/s" if t.get("ceiling") == "copy" and t.get("gbs") is not None else "GFLOP/s"
            value = t.get("gbs") if unit == "GB/s" else t.get("gflops")
            tests[t["id"]] = (value, unit, t.get("median_ms"))
        devices.append((dev.get("name", "?"), run.get("date", ""), tests))
    return devices


def main():
    ap = argparse.ArgumentParser(
        description="PyTorch scaled_dot_product_attention (float32) at the shapes of "
        "`prefixcl bench`, beside a prefixcl JSON run.")
    ap.add_argument("--json", help="a `prefixcl bench --json` run to print beside torch's figures")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    ap.add_argument("--quick", action="store_true", help="0.2 s of timed runs per test, not 1 s")
    ap.add_argument("--shapes", default="abcd", help="which of the shapes a-d to run (default abcd)")
    args = ap.parse_args()

    try:
        prefixcl = load_prefixcl(args.json) if args.json else []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        print("peer_torch.py: --json %s: %s" % (args.json, e), file=sys.stderr)
        return 2

    try:  # lazily: --help works without torch
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("peer_torch.py: PyTorch is not installed here; run it where torch is", file=sys.stderr)
        return 2

    dev = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    target = 0.2 if args.quick else 1.0
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    def timed(fn, min_runs=3, max_runs=200):
        fn()  # warm-up
        sync()
        times = []
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
        n = max(min_runs, min(max_runs, int(target / max(times[0], 1e-6))))
        for _ in range(n - 1):
            t0 = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    gqa_kw = {}
    try:
        import inspect
        if "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters:
            gqa_kw = {"enable_gqa": True}
    except (TypeError, ValueError):
        pass

    name = torch.cuda.get_device_name() if dev == "cuda" else "cpu (torch %d threads)" % torch.get_num_threads()
    rows = []
    g = torch.Generator(device="cpu").manual_seed(1)
    for tag, B, H, Hkv, N, M, P, D, causal, decode in SHAPES:
        if tag not in args.shapes:
            continue
        q = torch.randn(B, H, N, D, generator=g).to(dev)
        k = torch.randn(B, Hkv, M, D, generator=g).to(dev)
        v = torch.randn(B, Hkv, M, D, generator=g).to(dev)
        pk = torch.randn(Hkv, P, D, generator=g).to(dev)
        pv = torch.randn(Hkv, P, D, generator=g).to(dev)
        kk = torch.cat([pk.expand(B, Hkv, P, D), k], dim=2)
        vv = torch.cat([pv.expand(B, Hkv, P, D), v], dim=2)
        kw = {}
        if H != Hkv:
            if gqa_kw:
                kw.update(gqa_kw)
            else:
                kk = kk.repeat_interleave(H // Hkv, dim=1)
                vv = vv.repeat_interleave(H // Hkv, dim=1)
        if causal:
            i = torch.arange(N, device=dev).unsqueeze(1)
            t = torch.arange(M, device=dev).unsqueeze(0)
            visible = torch.cat([torch.ones(N, P, dtype=torch.bool, device=dev), t <= i + (M - N)], dim=1)
            kw["attn_mask"] = visible
        q.requires_grad_(True)
        kk.requires_grad_(True)
        vv.requires_grad_(True)
        do = torch.randn(B, H, N, D, generator=g).to(dev)

        def fwd():
            with torch.no_grad():
                return F.scaled_dot_product_attention(q, kk, vv, **kw)

        def fwd_bwd():
            o = F.scaled_dot_product_attention(q, kk, vv, **kw)
            o.backward(do)
            q.grad = kk.grad = vv.grad = None

        ms_f = timed(fwd)
        ms_fb = timed(fwd_bwd)
        ms_b = max(ms_fb - ms_f, 1e-6)
        flops = 4.0 * visible_pairs(B, H, N, M, P, causal) * D
        kv_bytes = 2.0 * 4 * (B * Hkv * M * D + Hkv * P * D)
        for kind, ms, mul in (("fwd", ms_f, 1.0), ("bwd", ms_b, 2.5)):
            if decode:
                value, unit = kv_bytes * (2 if kind == "bwd" else 1) / (ms * 1e-3) * 1e-9, "GB/s"
            else:
                value, unit = flops * mul / (ms * 1e-3) * 1e-9, "GFLOP/s"
            rows.append(("attn_%s.%s" % (kind, tag), ms, value, unit))
        del q, k, v, kk, vv, pk, pv, do
        if dev == "cuda":
            torch.cuda.empty_cache()

    print("torch %s on %s, float32 scaled_dot_product_attention (TF32 off)" % (torch.__version__, name))
    if not prefixcl:
        print("\n  %-12s %12s %12s %-8s" % ("test", "median (ms)", "value", "unit"))
        for tid, ms, value, unit in rows:
            print("  %-12s %12.2f %12.2f %-8s" % (tid, ms, value, unit))
        return 0
    for pname, date, tests in prefixcl:
        print("\nprefixcl: %s (%s) vs torch: %s" % (pname, date, name))
        print("  %-12s %-8s %12s %12s %12s %12s %10s" % ("test", "unit", "prefixcl", "torch",
                                                        "prefixcl ms", "torch ms", "ratio p/t"))
        for tid, ms, value, unit in rows:
            mine = tests.get(tid)
            if mine is None:
                print("  %-12s %-8s %12s %12.2f %12s %12.2f %10s" % (tid, unit, "skipped", value, "-", ms, "-"))
                continue
            pv_, punit, pms = mine
            ratio = (pv_ / value) if (punit == unit and value > 0 and pv_) else float("nan")
            print("  %-12s %-8s %12.2f %12.2f %12.2f %12.2f %10.2f" % (tid, unit, pv_ or 0.0, value,
                                                                      pms or 0.0, ms, ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
