#!/usr/bin/env python3
"""`prefixcl attn-map` against the library: the map it writes (--csv) has rows
that sum to 1, zeros where a causal map hides keys, and the mean prefix mass
and entropy of its rows equal what pfx_attention_stats computes without the
map (the "library" figures the command prints). Tolerances come from
tests/tolerances.h.

usage: check_attn_map.py PREFIXCL TOLERANCES_H OUT_DIR
"""
import csv
import math
import os
import re
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


def main():
    tool, header, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    tol_probs, tol_stats = tolerance(header, "TOL_PROBS_F32"), tolerance(header, "TOL_STATS_F32")
    shape = ["--n", "19", "--m", "19", "--p", "7", "--d", "24", "--heads", "3", "--seed", "4"]
    check(tool, out_dir, tol_probs, tol_stats, 2, shape + ["--causal", "--gain", "0.7"])
    check(tool, out_dir, tol_probs, tol_stats, 0, shape + ["--gain-mode", "tanh", "--gain", "-0.9"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
