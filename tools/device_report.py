#!/usr/bin/env python3
"""One command for the first run on a new device: what works, how fast.

Usage:
  tools/device_report.py [--device SEL] [--out DIR] [--limit S] [--small]
                         [--build DIR] [--tune-seconds S]

Runs, on one device (default: prefixcl's default device), one after the other:
  devices     prefixcl devices --json (every device, and this one)
  check       prefixcl check: every operation against the C reference
  gemm-tune   prefixcl gemm-tune --time-limit S (stored: later steps use it)
  bench       prefixcl bench --json: ceilings, SGEMM, attention, the encoder
  model-step  bench/bench_model: one prefix-tuning step of GPT-2 small's shape
  generate    bench/bench_generate: prefill and decode tokens/s
  peer        bench/peer_torch.py: the same operations in PyTorch on the same
              machine, side by side (only where `import torch` works)
and writes DIR/report.md and DIR/report.json (each step: status, seconds,
command, its headline figures, its log DIR/<step>.log) and a short table on
stdout. Every step runs under a time limit taken from what is left of --limit
(default 600 s, the whole report's hard limit); a step out of time is stopped
(its process group killed) and marked "timeout", and the steps after it are
marked "skipped: no time left" when under 10 s remain. A step that fails does
not stop the others. Exit status: 0 when every step ran ok or was skipped for
a stated reason (peer without PyTorch), 1 otherwise.

--small: sizes for simulators and CPUs (tests/meson.build runs it on PoCL):
a 2-second gemm-tune, `bench --quick --only sgemm.512,attn_fwd`, a model step
of batch 1 x 16 tokens, generation of 4 tokens after 8, no peer run.
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv):
    ap = argparse.ArgumentParser(description="prefixcl's one-command device report")
    ap.add_argument("--device", default=None, help="prefixcl's --device selector")
    ap.add_argument("--out", default="device-report", help="output folder (default device-report)")
    ap.add_argument("--limit", type=float, default=600.0, help="hard limit of the whole report, s")
    ap.add_argument("--small", action="store_true", help="small sizes (simulators, CPUs, tests)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build folder")
    ap.add_argument("--tune-seconds", type=int, default=None,
                    help="gemm-tune's --time-limit (default 60, --small 2)")
    return ap.parse_args(argv)


class Report:
    def __init__(self, args):
        self.args = args
        self.start = time.monotonic()
        self.steps = []

    def left(self):
        return self.args.limit - (time.monotonic() - self.start)

    def run(self, name, cmd, share=1.0, parse=None, env=None):
        """Runs cmd with at most `share` of the time left; parse(log, step) adds figures."""
        step = {"step": name, "command": " ".join(cmd), "status": "", "seconds": 0.0,
                "figures": {}, "log": os.path.join(self.args.out, name + ".log")}
        self.steps.append(step)
        left = self.left()
        if left < 10:
            step["status"] = "skipped: no time left"
            return step
        budget = max(5.0, left * share)
        t0 = time.monotonic()
        with open(step["log"], "w") as log:
            log.write("$ %s\n" % step["command"])
            log.flush()
            try:
                p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=env)
            except OSError as e:
                step["status"] = "failed: %s" % e
                return step
            try:
                rc = p.wait(timeout=budget)
                step["status"] = "ok" if rc == 0 else "failed: exit status %d" % rc
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                step["status"] = "timeout: stopped after %.0f s" % budget
        step["seconds"] = round(time.monotonic() - t0, 2)
        if parse:
            try:
                with open(step["log"], errors="replace") as f:
                    parse(f.read(), step)
            except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
                step["figures"]["parse_error"] = str(e)
        return step

    def skip(self, name, why):
        self.steps.append({"step": name, "command": "", "status": "skipped: " + why,
                           "seconds": 0.0, "figures": {}, "log": ""})


def load_json(path):
    with open(path) as f:
        return json.load(f)


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    tool = os.path.join(args.build, "tools", "prefixcl")
    bench_dir = os.path.join(args.build, "bench")
    dev = ["--device", args.device] if args.device else []
    r = Report(args)
    out = args.out
    figures = {}

    def p_devices(log, step):
        text = log[log.index("{"):]
        devices = json.loads(text)["devices"]
        step["figures"]["devices"] = len(devices)
        for d in devices:
            if d.get("default"):
                step["figures"]["default"] = "%s / %s (%s)" % (d.get("platform"), d.get("name"),
                                                             d.get("driver_version"))
        figures["devices"] = devices

    r.run("devices", [tool, "devices", "--json"], share=0.05, parse=p_devices)

    def p_check(log, step):
        m = re.search(r"(\d+) of (\d+) checks passed", log)
        if m:
            step["figures"]["passed"] = int(m.group(1))
            step["figures"]["run"] = int(m.group(2))
        m = re.search(r"^device: (.*)$", log, re.M)
        if m:
            step["figures"]["device"] = m.group(1)
        step["figures"]["failed_lines"] = [l for l in log.splitlines() if l.rstrip().endswith("FAIL")][:20]

    r.run("check", [tool, "check"] + dev, share=0.3, parse=p_check)

    tune_s = args.tune_seconds or (2 if args.small else 60)

    def p_tune(log, step):
        for key in ("tried", "untuned", "tuned", "stored"):
            m = re.search(r"^%s\s*: (.*)$" % key, log, re.M)
            if m:
                step["figures"][key] = m.group(1).strip()

    r.run("gemm-tune", [tool, "gemm-tune", "--quiet", "--time-limit", str(tune_s)] + dev,
          share=0.3, parse=p_tune)

    bench_json = os.path.join(out, "bench.json")
    bench_cmd = [tool, "bench", "--json", bench_json] + dev
    bench_cmd += ["--quick", "--only", "sgemm.512,attn_fwd"] if args.small else ["--quick"]

    def p_bench(log, step):
        run = load_json(bench_json)
        d = run["devices"][0]
        tests = [t for t in d["tests"] if t.get("status") == "ok"]
        step["figures"]["tests_ok"] = len(tests)
        step["figures"]["tests"] = len(d["tests"])
        best = {}
        for t in tests:
            if t.get("gflops") is not None:
                key = t["id"].split(".")[0]
                if key not in best or t["gflops"] > best[key][1]:
                    best[key] = (t["id"], t["gflops"])
        step["figures"]["best_gflops"] = {k: {"id": v[0], "gflops": v[1]} for k, v in best.items()}
        figures["bench"] = run

    r.run("bench", bench_cmd, share=0.4, parse=p_bench)

    model_json = os.path.join(out, "bench_model.json")
    model_cmd = [os.path.join(bench_dir, "bench_model"), "--json", model_json] + dev
    model_cmd += ["--batch", "1", "--tokens", "16", "--steps", "1", "--warmup", "0"] if args.small else []

    def p_model(log, step):
        m = load_json(model_json)
        step["figures"].update({"batch": m["batch"], "tokens": m["tokens"],
                                "phases_wall_ms": {k: v["wall_ms"] for k, v in m["phases"].items()},
                                "peak_MiB": round(m["peak_bytes"] / 1048576.0, 1)})

    if os.path.exists(model_cmd[0]):
        r.run("model-step", model_cmd, share=0.4, parse=p_model)
    else:
        r.skip("model-step", "%s not built (-Dbench=disabled)" % model_cmd[0])

    gen_json = os.path.join(out, "bench_generate.json")
    gen_cmd = [os.path.join(bench_dir, "bench_generate"), "--json", gen_json] + dev
    gen_cmd += ["--batch", "1", "--tokens", "8", "--new", "4", "--runs", "1"] if args.small else []

    def p_gen(log, step):
        g = load_json(gen_json)
        step["figures"]["tokens_per_s"] = {
            "batch %d" % x["batch"]: {"prefill": x["prefill_tokens_per_s"], "decode": x["decode_tokens_per_s"]}
            for x in g["results"]}

    if os.path.exists(gen_cmd[0]):
        r.run("generate", gen_cmd, share=0.5, parse=p_gen)
    else:
        r.skip("generate", "%s not built (-Dbench=disabled)" % gen_cmd[0])

    torch_ok = subprocess.call([sys.executable, "-c", "import torch"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) == 0
    peer_json = os.path.join(out, "peer.json")
    if args.small:
        r.skip("peer", "--small")
    elif not torch_ok:
        r.skip("peer", "no PyTorch (python3 -c 'import torch' fails)")
    else:
        def p_peer(log, step):
            step["figures"]["table"] = load_json(peer_json)

        r.run("peer", [sys.executable, os.path.join(ROOT, "bench", "peer_torch.py"), "--prefixcl", tool,
                       "--quick", "--json", peer_json] + dev, share=1.0, parse=p_peer)

    ok = all(s["status"] == "ok" or s["status"].startswith("skipped: ") and
             not s["status"].startswith("skipped: no time") for s in r.steps)
    report = {"tool": "tools/device_report.py", "format": 1,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "host": platform.node(), "limit_s": args.limit, "small": args.small,
              "seconds": round(time.monotonic() - r.start, 1), "ok": ok, "steps": r.steps,
              "devices": figures.get("devices", [])}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    write_markdown(os.path.join(out, "report.md"), report)
    print("%-11s %-34s %8s  %s" % ("step", "status", "seconds", "headline"))
    for s in r.steps:
        print("%-11s %-34s %8.1f  %s" % (s["step"], s["status"][:34], s["seconds"], headline(s)))
    print("report: %s, %s (%.0f s of %.0f)" % (os.path.join(out, "report.md"),
                                               os.path.join(out, "report.json"), report["seconds"],
                                               args.limit))
    return 0 if ok else 1


def headline(s):
    f = s["figures"]
    if s["step"] == "devices" and "default" in f:
        return "%d device(s); default %s" % (f["devices"], f["default"])
    if s["step"] == "check" and "run" in f:
        return "%d of %d checks passed" % (f["passed"], f["run"])
    if s["step"] == "gemm-tune" and "tuned" in f:
        return "untuned %s, tuned %s" % (f.get("untuned", "?").split(" over")[0], f["tuned"])
    if s["step"] == "bench" and "tests" in f:
        best = ", ".join("%s %.1f GFLOP/s" % (v["id"], v["gflops"]) for v in f["best_gflops"].values())
        return "%d of %d tests ok; best: %s" % (f["tests_ok"], f["tests"], best)
    if s["step"] == "model-step" and "phases_wall_ms" in f:
        return "B%d N%d: %s" % (f["batch"], f["tokens"], ", ".join(
            "%s %.1f ms" % (k, v) for k, v in f["phases_wall_ms"].items()))
    if s["step"] == "generate" and "tokens_per_s" in f:
        return "; ".join("%s: prefill %.1f, decode %.1f tokens/s" % (k, v["prefill"], v["decode"])
                         for k, v in f["tokens_per_s"].items())
    return ""


def write_markdown(path, rep):
    lines = ["# prefixcl device report", "",
             "%s on %s; %.0f s of a %.0f s limit%s; %s." % (
                 rep["date"], rep["host"], rep["seconds"], rep["limit_s"],
                 ", small sizes" if rep["small"] else "", "every step ok" if rep["ok"] else "NOT all ok"),
             ""]
    for d in rep["devices"]:
        lines.append("- %s`%s` %s / %s, driver %s, %s, %d compute units, %.1f GiB, local %d KiB" % (
            "**default** " if d.get("default") else "", d.get("selector"), d.get("platform"), d.get("name"),
            d.get("driver_version"), d.get("type"), d.get("compute_units", 0),
            d.get("global_mem_bytes", 0) / 2 ** 30, d.get("local_mem_bytes", 0) // 1024))
    lines += ["", "| step | status | seconds | headline |", "|---|---|---|---|"]
    for s in rep["steps"]:
        lines.append("| %s | %s | %.1f | %s |" % (s["step"], s["status"], s["seconds"],
                                                  headline(s).replace("|", "/")))
    lines += [""]
    for s in rep["steps"]:
        if not s["command"]:
            continue
        lines += ["## %s" % s["step"], "", "`%s` (log: `%s`)" % (s["command"], s["log"]), ""]
        if s["figures"]:
            lines += ["```json", json.dumps(s["figures"], indent=1)[:6000], "```", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
