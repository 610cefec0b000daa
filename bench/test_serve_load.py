#!/usr/bin/env python3
"""bench/serve_load.py without a server: its percentiles, a measurement's
figures and the medians over rounds on made-up requests, its markdown tables,
--help on the standard library alone and its bad options refused before any
server starts.

usage: test_serve_load.py   (standard library only)
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serve_load as sl  # noqa: E402

failures = 0


def expect(name, ok, detail=""):
    global failures
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else ": " + detail))
    failures += not ok


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


# percentiles: numpy's linear default (numpy.percentile([5, 1, 4, 2, 3], q))
xs = [5, 1, 4, 2, 3]
for q, want in ((50, 3.0), (99, 4.96), (0, 1.0), (100, 5.0), (25, 2.0), (90, 4.6)):
    got = sl.percentile(xs, q)
    expect("percentile %d of 1..5" % q, close(got, want), "%r, expected %r" % (got, want))
got = sl.percentile(list(range(1, 65)), 99)
expect("p99 of 64 values lies between the two largest", close(got, 63.37), repr(got))
expect("percentile of one value", sl.percentile([0.25], 99) == 0.25)

# a measurement: 4 requests of 3 tokens (one short) over 2 s of wall time
recs = [{"start": 10.0, "first": 10.1, "end": 10.5, "prompt_tokens": 5, "completion_tokens": 3},
        {"start": 10.0, "first": 10.3, "end": 11.0, "prompt_tokens": 5, "completion_tokens": 3},
        {"start": 10.5, "first": 10.6, "end": 11.3, "prompt_tokens": 5, "completion_tokens": 3},
        {"start": 10.8, "first": 11.4, "end": 12.0, "prompt_tokens": 5, "completion_tokens": 2}]
f = sl.summarize(recs, 3)
want = {"requests": 4, "tokens": 11, "wall_s": 2.0, "tokens_per_s": 5.5, "p50_s": 0.9,
        "p99_s": 1.194, "ttft_p50_s": 0.2, "ttft_min_s": 0.1, "ttft_max_s": 0.6,
        "prompt_tokens": 20, "short": 1}
for k, v in want.items():
    expect("summarize %s" % k, close(f[k], v), "%r, expected %r" % (f[k], v))

# medians over rounds, each figure on its own
runs = [{"tokens_per_s": 10, "p50_s": 3, "p99_s": 9, "ttft_p50_s": 1},
        {"tokens_per_s": 30, "p50_s": 1, "p99_s": 7, "ttft_p50_s": 2},
        {"tokens_per_s": 20, "p50_s": 2, "p99_s": 8, "ttft_p50_s": 9}]
m = sl.medians(runs)
expect("medians over rounds", m == {"tokens_per_s": 20, "p50_s": 2, "p99_s": 8, "ttft_p50_s": 2},
       repr(m))

# the tables
a = {"tokens_per_s": 40.0, "p50_s": 1.0, "p99_s": 2.0, "ttft_p50_s": 0.1}
b = {"tokens_per_s": 50.0, "p50_s": 0.8, "p99_s": 2.5, "ttft_p50_s": 0.2}
table = sl.load_table({"16": {"prefixcl": a, "llama-server": b},
                       "4": {"prefixcl": b, "llama-server": a}})
lines = table.splitlines()
expect("load table: header and rows in clients order", len(lines) == 4 and
       lines[0].startswith("| clients | tokens/s prefixcl | llama-server | ratio |") and
       lines[2].startswith("| 4 |") and lines[3].startswith("| 16 |"), table)
expect("load table: a row of figures and ratios",
       lines[3] == "| 16 | 40.0 | 50.0 | 0.80 | 1.000 | 0.800 | 1.25 | 2.000 | 2.500 | 0.80 "
       "| 0.100 | 0.200 | 0.50 |", lines[3])
one = sl.one_server_table({"1": {"prefixcl": a}}, "prefixcl")
expect("one server's table", one.splitlines()[2] == "| 1 | 40.0 | 1.000 | 2.000 | 0.100 |", one)
chat = {"prefixcl": {"off": dict(a, reused=0, prompt_tokens=100),
                     "on": dict(b, reused=90, prompt_tokens=100)}}
ct = sl.chat_table(chat, 256).splitlines()
expect("chat table", ct[2] == "| prefixcl | none | 0.100 | 1.000 | 0 of 100 |  |" and
       ct[3] == "| prefixcl | --prompt-cache 256 | 0.200 | 0.800 | 90 of 100 | 2.00 |",
       "\n".join(ct))

# the command line: --help with no site packages; bad options named, no server run
exe = os.path.join(HERE, "serve_load.py")
with tempfile.TemporaryDirectory() as tmp:
    out = subprocess.run([sys.executable, "-S", exe, "--help"], capture_output=True, text=True)
    expect("--help without site packages", out.returncode == 0 and "--llama-build" in out.stdout,
           out.stderr)
    for args, pattern in ((["--work", tmp, "--clients", "1,0"], "--clients: at least 1"),
                          (["--work", tmp, "--clients", "1,x"], "--clients 1,x"),
                          (["--work", tmp, "--servers", "vllm"], "--servers vllm"),
                          (["--work", tmp, "--rounds", "0"], "--rounds: at least 1"),
                          ([], "--work"),
                          (["--work", tmp], "--llama-build is required"),
                          (["--work", tmp, "--servers", "prefixcl"], "gpt2-small/config.json"),
                          (["--model", HERE, "--servers", "prefixcl"], "config.json")):
        out = subprocess.run([sys.executable, "-S", exe] + args, capture_output=True, text=True,
                             timeout=60)
        expect("refuses %s" % (" ".join(a.replace(tmp, "DIR") for a in args) or "no --work"),
               out.returncode != 0 and pattern in out.stderr, out.stderr.strip())

print("%d failed" % failures)
sys.exit(1 if failures else 0)
