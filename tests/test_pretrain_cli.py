#!/usr/bin/env python3
"""`prefixcl pretrain` as a user types it, on a tiny GPT-2 config and the
demonstration's tokenizer and corpus (data/demo): a run with a linear gain
writes the Hugging Face folder, the gains, the curve and the pictures and
lowers the evaluation loss; the folder fine-tunes again (--model), a run
without a gain removing an earlier run's gains and gain pictures; a run
stopped by SIGINT at a step boundary leaves a checkpoint that --resume
finishes with the same curve as an uninterrupted run, and on a terminal its
summary starts on a line of its own under the progress bar (which shows the
learning rate, as loss.csv does); --gain-heads trains
the gains of the heads it names only; bad options and inputs are named.

usage: test_pretrain_cli.py PREFIXCL DEMO_DIR   (standard library only)
"""
import csv
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import tempfile

from cli_run import run

CONFIG = ('{"model_type": "gpt2", "n_embd": 48, "n_layer": 2, "n_head": 4, "vocab_size": 2197, '
          '"n_positions": 64, "bos_token_id": 0, "eos_token_id": 0}')


def curve(path):
    with open(path) as f:
        return [row for row in csv.DictReader(f)]


def read_f32(path, name):
    """Tensor `name` of a safetensors file as a list of floats (F32 only)."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        begin, end = header[name]["data_offsets"]
        f.seek(8 + size + begin)
        raw = f.read(end - begin)
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


def main():
    exe, demo = sys.argv[1], sys.argv[2]
    data, held = os.path.join(demo, "train.txt"), os.path.join(demo, "eval.txt")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "tiny.json")
        with open(cfg, "w") as f:
            f.write(CONFIG)
        common = ["--tokenizer", demo, "--data", data, "--block", "32", "--batch", "4", "--lr", "3e-3",
                  "--warmup", "3", "--seed", "3"]
        out = os.path.join(tmp, "out")
        stdout, _ = run(exe, ["pretrain", "--config", cfg, "--out", out, "--steps", "16", "--gain", "linear",
                              "--gain-lr", "1e-3", "--gain-ramp", "4", "--eval", held, "--eval-every", "8"] + common)
        for name in ("config.json", "model.safetensors", "gains.safetensors", "loss.csv", "checkpoint.safetensors"):
            if not os.path.exists(os.path.join(out, name)):
                sys.exit("pretrain wrote no %s: %r" % (name, stdout))
        rows = curve(os.path.join(out, "loss.csv"))
        evals = [(r["step"], float(r["eval_loss"])) for r in rows if r["eval_loss"]]
        if [s for s, _ in evals] != ["0", "8", "16"] or not evals[-1][1] < evals[0][1] - 0.5:
            sys.exit("evaluation losses %r" % evals)
        lrs = [float(r["lr"]) for r in rows if r["step"] != "0"]
        if len(lrs) != 16 or not 0 < lrs[0] < lrs[2] or abs(max(lrs) - 3e-3) > 1e-9:
            sys.exit("loss.csv's learning rates (warm-up 3 to 3e-3): %r" % lrs)
        if "evaluation loss: before" not in stdout or "transformers loads the folder without the gains" not in stdout:
            sys.exit("pretrain's report: %r" % stdout)
        if not re.search(r"^step 1/16 .* tokens/s \d+ mfu \d+\.\d\d% ", stdout, re.M) or \
                not re.search(r"\d+ tokens/s, MFU \d+\.\d\d% of 1 x [\d.]+ GFLOP/s", stdout):
            sys.exit("pretrain's tokens/s and MFU: %r" % stdout)

        # the corpus as token shards (tokenize --out), read by a pattern
        shards = os.path.join(tmp, "shards")
        os.mkdir(shards)
        run(exe, ["tokenize", "--model", demo, "--file", data, "--out", os.path.join(shards, "demo"),
                  "--shard-tokens", "9000"])
        stdout, _ = run(exe, ["pretrain", "--config", cfg, "--out", os.path.join(tmp, "from-shards"), "--steps", "2",
                              "--data", os.path.join(shards, "demo_*.bin")] + common[4:])
        if "data: " not in stdout or "evaluation loss: before" not in stdout:
            sys.exit("pretrain on shards: %r" % stdout)
        pictures = "built without cairo" not in stdout
        if pictures and not all(os.path.exists(os.path.join(out, p)) for p in ("loss.png", "gains.png", "gains_steps.png")):
            sys.exit("pictures missing: %r" % stdout)

        # full fine-tuning of the folder just written, without a gain, into a
        # folder that holds an earlier gain run's outputs: they go
        tuned = os.path.join(tmp, "tuned")
        os.mkdir(tuned)
        stale = ("gains.safetensors", "gains.png", "gains_steps.png")
        for name in stale:
            with open(os.path.join(tuned, name), "wb") as f:
                f.write(b"an earlier run's")
        run(exe, ["pretrain", "--model", out, "--out", tuned, "--steps", "2"] + common)
        if not os.path.exists(os.path.join(tuned, "model.safetensors")):
            sys.exit("fine-tuning wrote no model")
        left = [name for name in stale if os.path.exists(os.path.join(tuned, name))]
        if left:
            sys.exit("a run without a gain left an earlier run's %s" % left)

        # stopped by SIGINT, resumed: the curve of an uninterrupted run
        straight, stopped = os.path.join(tmp, "straight"), os.path.join(tmp, "stopped")
        long_run = ["--config", cfg, "--steps", "60", "--accumulate", "2"] + common
        run(exe, ["pretrain", "--out", straight] + long_run)
        p = subprocess.Popen([exe, "pretrain", "--out", stopped] + long_run, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        # plain progress lines (not a terminal): stop once step 10 is reported
        for line in p.stdout:
            if line.startswith(b"step 10/"):
                break
        p.send_signal(signal.SIGINT)
        o, e = p.communicate(timeout=120)
        if p.returncode != 130 or b"stopped after step" not in o:
            sys.exit("SIGINT: exit %d\n%s\n%s" % (p.returncode, o.decode(), e.decode()))
        if os.path.exists(os.path.join(stopped, "model.safetensors")):
            sys.exit("a stopped run wrote the model")
        run(exe, ["pretrain", "--out", stopped, "--resume"] + long_run)
        if curve(os.path.join(stopped, "loss.csv")) != curve(os.path.join(straight, "loss.csv")):
            sys.exit("the resumed run's curve differs from the uninterrupted one")
        with open(os.path.join(stopped, "model.safetensors"), "rb") as a, \
                open(os.path.join(straight, "model.safetensors"), "rb") as b:
            if a.read() != b.read():
                sys.exit("the resumed run's weights differ from the uninterrupted one's")

        # on a terminal: the bar, and after Ctrl-C the summary on its own line
        master, slave = pty.openpty()
        p = subprocess.Popen([exe, "pretrain", "--out", os.path.join(tmp, "tty")] + long_run,
                             stdout=slave, stderr=subprocess.DEVNULL)
        os.close(slave)
        seen = b""
        while b"step 10/" not in seen:
            chunk = os.read(master, 4096)
            if not chunk:
                break
            seen += chunk
        p.send_signal(signal.SIGINT)
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        p.wait(timeout=120)
        os.close(master)
        text = seen.decode(errors="replace").replace("\r\n", "\n")
        if p.returncode != 130 or not re.search(r"\] step \d+/60  loss [0-9.]+  lr [0-9.e+-]+", text) or \
                not re.search(r"s left \n+device: ", text):
            sys.exit("pretrain on a terminal, stopped: exit %d %r" % (p.returncode, text))

        # named refusals
        other = [a if a != "32" else "24" for a in long_run]  # --block 24
        _, err = run(exe, ["pretrain", "--out", stopped, "--resume"] + other, code=2)  # a bad option
        if "block=32" not in err or "same" not in err:
            sys.exit("a resume with another --block: %r" % err)
        _, err = run(exe, ["pretrain", "--config", cfg, "--model", out, "--data", data], code=2)
        if "--config" not in err or "--model" not in err:
            sys.exit("--config with --model: %r" % err)
        _, err = run(exe, ["pretrain", "--config", cfg, "--data", data, "--block", ""], code=2)
        if "bad --block ''" not in err:
            sys.exit("an empty --block: %r" % err)
        _, err = run(exe, ["pretrain", "--config", cfg, "--tokenizer", demo, "--data", held, "--block", "5000",
                           "--out", os.path.join(tmp, "short")], code=1)
        if "one block" not in err:
            sys.exit("data shorter than one block: %r" % err)
        _, err = run(exe, ["pretrain", "--config", cfg, "--data", data, "--out", cfg], code=2)
        if "--out" not in err:
            sys.exit("--out naming a file: %r" % err)
        # a FIFO as --config (copied into --out) or --data: refused at once, not read
        fifo = os.path.join(tmp, "fifo.json")
        os.mkfifo(fifo)
        _, err = run(exe, ["pretrain", "--config", fifo, "--data", data, "--out", os.path.join(tmp, "f1")], code=2,
                     timeout=20)
        if "--config: not a regular file: " + fifo not in err:
            sys.exit("a FIFO as --config: %r" % err)
        _, err = run(exe, ["pretrain", "--config", cfg, "--tokenizer", demo, "--data", fifo, "--out",
                           os.path.join(tmp, "f2")], code=2, timeout=20)
        if "--data: not a regular file: " + fifo not in err:
            sys.exit("a FIFO as --data: %r" % err)

        # gains on two heads only: the others stay 0 in gains.safetensors
        heads = os.path.join(tmp, "heads")
        stdout, _ = run(exe, ["pretrain", "--config", cfg, "--out", heads, "--steps", "4", "--gain", "linear",
                              "--gain-ramp", "1", "--gain-lr", "1e-2", "--gain-heads", "0.1, 1.3"] + common)
        if "gains on 0.1, 1.3 only" not in stdout:
            sys.exit("--gain-heads's report: %r" % stdout)
        gains = read_f32(os.path.join(heads, "gains.safetensors"), "gains")
        if any(g != 0.0 for i, g in enumerate(gains) if i not in (1, 7)) or gains[1] == 0.0 or gains[7] == 0.0:
            sys.exit("--gain-heads 0.1,1.3: gains %r" % gains)
        # the list's form (the command), the heads against the model (the job's message)
        for bad, needle in (("0.1,", "--gain-heads 0.1,: an empty"), ("1", "--gain-heads 1: '1' is not LAYER.HEAD"),
                            ("0.1 1.2", "commas"), ("a.1", "LAYER.HEAD"),
                            ("2.0", "config.gain_heads[0] (layer 2, head 0): the layer is not below the model's 2"),
                            ("0.4", "config.gain_heads[0] (layer 0, head 4): the head is not below the model's 4"),
                            ("0.1,0.1", "config.gain_heads[1] (layer 0, head 1) is given twice")):
            _, err = run(exe, ["pretrain", "--config", cfg, "--out", heads, "--gain", "tanh", "--gain-heads", bad]
                         + common, code=2)
            if needle not in err:
                sys.exit("--gain-heads %r: %r" % (bad, err))
        _, err = run(exe, ["pretrain", "--config", cfg, "--tokenizer", demo, "--data", data, "--out", heads,
                           "--gain-heads", "0.1"], code=2)
        if "gain_heads" not in err or "without a gain" not in err:
            sys.exit("--gain-heads without --gain: %r" % err)
    print("ok")


if __name__ == "__main__":
    main()
