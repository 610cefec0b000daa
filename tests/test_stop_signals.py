#!/usr/bin/env python3
"""SIGTERM (what kill, systemd and Slurm send) stops every long command as
SIGINT does: at a step boundary, exit 128 + 15 = 143, nothing lost. tune saves
its checkpoint and --resume continues (stopped by SIGINT then: 130); train
analyses and writes what it trained; generate prints the rounds done; eval
prints no partial loss; bench writes the tests it measured. Each running
command is named after its program in /proc/PID/comm (what ps and pgrep
read). Runs on the tiny GPT-2 generate fixture.

usage: test_stop_signals.py PREFIXCL FIXTURE_DIR OUT_DIR   (standard library only)
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time


def fail(what, p_out, p_err):
    sys.exit("%s\n--- stdout\n%s\n--- stderr\n%s" % (what, p_out[-2000:], p_err[-2000:]))


def check_name(p, args):
    """The running command keeps its program's name (ps, top, pgrep, the
    journal read /proc/PID/comm), through the tool's re-execution of itself."""
    with open("/proc/%d/comm" % p.pid) as f:
        comm = f.read().strip()
    want = os.path.basename(args[0])[:15]
    if comm != want:
        p.kill()
        out, err = p.communicate()
        fail("%s: the process is named '%s', not '%s'" % (args[1], comm, want), out, err)


def stopped_run(args, sig, wait_for=None, delay=1.0, on_stderr=False):
    """Starts args, sends sig once wait_for appears on stdout (a flushed line;
    stderr when on_stderr) or after delay seconds, and returns (exit status,
    stdout, stderr)."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace")
    head = ""
    if wait_for:
        for line in p.stderr if on_stderr else p.stdout:
            head += line
            if wait_for in line:
                break
    else:
        time.sleep(delay)
    check_name(p, args)
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        fail("%s: did not stop within 120 s of the signal" % args[1], out, head + err)
    return (p.returncode, out, head + err) if on_stderr else (p.returncode, head + out, err)


def main():
    exe, fix, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    model = os.path.join(fix, "gpt2")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    data = os.path.join(out_dir, "data.txt")
    with open(data, "w") as f:
        f.writelines("the quick brown fox jumps over the lazy dog %d\n" % i for i in range(200))

    # tune: SIGTERM after the first step, the checkpoint saved, --resume goes on
    tune_out = os.path.join(out_dir, "tune")
    tune = [exe, "tune", "--model", model, "--data", data, "--out", tune_out, "--max-length", "16",
            "--batch", "2", "--prefix-len", "4", "--hidden", "0", "--steps", "100000"]
    rc, out, err = stopped_run(tune, signal.SIGTERM, wait_for="/100000")
    if rc != 143 or "stopped after step" not in out:
        fail("tune, SIGTERM: exit %d, not 143 with 'stopped after step'" % rc, out, err)
    ckpt = os.path.join(tune_out, "checkpoint.safetensors")
    if not os.path.isfile(ckpt):
        fail("tune, SIGTERM: no %s" % ckpt, out, err)
    rc, out2, err = stopped_run(tune + ["--resume"], signal.SIGINT, wait_for="/100000")
    if rc != 130 or "stopped after step" not in out2:
        fail("tune --resume, SIGINT: exit %d, not 130 with 'stopped after step'" % rc, out2, err)

    # train: SIGTERM after the first step, the outputs of the steps done written
    train_out = os.path.join(out_dir, "train")
    rc, out, err = stopped_run([exe, "train", "--steps", "100000", "--layers", "1", "--out", train_out],
                               signal.SIGTERM, wait_for="step 1/")
    if rc != 143 or "stopped after step" not in out:
        fail("train, SIGTERM: exit %d, not 143 with 'stopped after step'" % rc, out, err)
    for name in ("loss.csv", "prefixes.safetensors", os.path.join("peft", "adapter_model.safetensors")):
        if not os.path.isfile(os.path.join(train_out, name)):
            fail("train, SIGTERM: no %s" % name, out, err)

    # generate: many rounds of requests; SIGTERM once output arrives, the rest not run
    prompts = os.path.join(out_dir, "prompts.txt")
    n = 20000
    with open(prompts, "w") as f:
        f.writelines("the quick brown fox %d\n" % i for i in range(n))
    p = subprocess.Popen([exe, "generate", "--model", model, "--prompts", prompts, "--max-new-tokens", "16"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace")
    first = p.stdout.readline()  # the first rounds are printed (stdout is a pipe: in blocks)
    check_name(p, [exe, "generate"])
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    out = first + out
    if p.returncode != 143 or "stopped by signal 15 after" not in err or out.count("\n") >= n:
        fail("generate, SIGTERM: exit %d, not 143 with fewer than %d answers" % (p.returncode, n), out, err)

    # eval: SIGTERM during the pass; no loss printed for a part of the data
    big = os.path.join(out_dir, "big.txt")
    with open(big, "w") as f:
        f.writelines("the quick brown fox jumps over the lazy dog %d\n" % i for i in range(20000))
    rc, out, err = stopped_run([exe, "eval", "--model", model, "--data", big, "--batch", "8"], signal.SIGTERM,
                               delay=1.0)
    if rc != 143 or "stopped by signal 15" not in err or "loss" in out:
        fail("eval, SIGTERM: exit %d, not 143 without a loss" % rc, out, err)
    # bench: SIGTERM once the second test runs; the tests measured are written
    run_json = os.path.join(out_dir, "bench.json")
    # (the products and the attention forward: quick tests on every implementation, rusticl's too)
    rc, out, err = stopped_run([exe, "bench", "--quick", "--only", "sgemm,attn_fwd", "--json", run_json],
                               signal.SIGTERM, wait_for="test 2/", on_stderr=True)
    if rc != 143 or "stopped by signal 15" not in err or not os.path.isfile(run_json):
        fail("bench, SIGTERM: exit %d, not 143 with %s written" % (rc, run_json), out, err)
    with open(run_json) as f:
        tests = json.load(f)["devices"][0]["tests"]
    if not 1 <= len(tests) < 10:
        fail("bench, SIGTERM: %d tests in %s" % (len(tests), run_json), out, err)
    print("ok")


if __name__ == "__main__":
    main()
