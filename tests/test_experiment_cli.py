#!/usr/bin/env python3
"""`prefixcl experiment gain` end to end at a tiny size: a small corpus made
by tools/corpus/wordnet_corpus.py from WordNet-format files written here
(invented glosses), the committed data/wordnet tokenizer, a 2-layer model,
the baseline, linear, selected, uniform and decay arms for a few steps, each
final model prefix-tuned a few steps on the lexicographer-file
classification. report.md holds every arm in the claims' table with finite
figures (the classification's accuracy and its claims among them, the
unigram perplexity; the held-out loss of the right labels from the
classification's scores equals the tune job's evaluation of them), results.json parses with the same arms, the pictures
are PNGs of a sensible size; bad options are refused naming the option.
Then a run stopped by SIGINT during training (mid-arm, a finished arm before
it), resumed and stopped during the generation speed, resumed and stopped
during the probe, resumed and stopped during the classification (a
finished arm's classification before it, kept), and resumed to the end
gives the figures of a run never stopped, bit for bit; --resume with
another option is refused naming it; a finished run typed with relative
folders resumes.

usage: test_experiment_cli.py PREFIXCL CORPUS_SCRIPT TOKENIZER_DIR cairo|none
(standard library only)
"""
import json
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

from cli_run import run

LEX = (("noun", 5, "n"), ("noun", 13, "n"), ("verb", 38, "v"), ("adj", 0, "a"), ("adv", 2, "r"))
WORDS = ("small animal", "red food", "quick motion", "old tree", "bright light", "soft sound", "large city",
         "warm water", "green plant", "heavy stone")


def fake_wordnet(folder):
    """data.noun ... with 100 synsets of each lexicographer file above."""
    os.makedirs(folder)
    files = {}
    for pos, lex, letter in LEX:
        lines = files.setdefault(pos, [])
        for i in range(100):
            offset = 1000 + 97 * i + lex * 100000
            topic = WORDS[(i + lex) % len(WORDS)]
            gloss = "a %s of the %s kind, number %d; \"the %s was seen\"" % (topic, pos, i, topic.split()[-1])
            lines.append("%08d %02d %s 01 %s_%d 0 000 | %s  \n" % (offset, lex, letter, pos, i, gloss))
    for pos, lines in files.items():
        with open(os.path.join(folder, "data." + pos), "w") as f:
            f.write("  1 This software and database is being provided to you, the LICENSEE, by  \n")
            f.writelines(lines)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        sys.exit("%s is not a PNG" % path)
    return struct.unpack(">II", head[16:24])


def stopped_at(exe, args, line):
    """Runs exe args, sends SIGINT once a line of stdout starts with `line`;
    (exit status, stderr)."""
    p = subprocess.Popen([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    for out in p.stdout:
        seen += out
        if out.startswith(line):
            p.send_signal(signal.SIGINT)
            break
    rest, err = p.communicate(timeout=120)
    return p.returncode, seen + rest, err


def resume_checks(exe, corpus, tokenizer, tmp):
    args = ["--corpus", corpus, "--tokenizer", tokenizer, "--layers", "2", "--hidden", "32", "--heads", "4",
            "--block", "32", "--batch", "4", "--steps", "10", "--measure-every", "2", "--eval-every", "5",
            "--eval-blocks", "4", "--gen-tokens", "16", "--gen-reps", "30", "--probe-docs", "0", "--lr", "3e-3",
            "--seeds", "1", "--arms", "baseline,linear", "--classify-steps", "20", "--classify-prefix", "4",
            "--classify-test", "0"]
    ref, out = os.path.join(tmp, "ref"), os.path.join(tmp, "resumed")
    # the reference typed with relative folders, then resumed once finished:
    # every arm resumes from its checkpoint, which must name the same paths
    rel = ["--corpus", os.path.relpath(corpus, tmp), "--tokenizer", os.path.relpath(tokenizer, tmp)] + args[4:]
    run(exe, ["experiment", "gain", "--out", "ref", "--quiet"] + rel, cwd=tmp)
    run(exe, ["experiment", "gain", "--resume", "ref"], cwd=tmp)
    cmd = ["experiment", "gain", "--out", out] + args
    # the tiny probe may end before its SIGINT arrives: the stop then falls
    # in the classification that follows it
    for line, phase in (("  linear   step     4/10", "during training"),
                        ("generation speed", "during the generation speed"),
                        ("probe", "during the (probe|classification)"),
                        ("  classify linear", "during the classification")):
        code, stdout, err = stopped_at(exe, cmd, line)
        if code != 130 or not re.search(phase, err) or "--resume" not in err:
            sys.exit("a stop %s: exit %d\n%s\n%s" % (phase, code, stdout[-1500:], err))
        if phase == "during training" and not os.path.exists(os.path.join(out, "linear", "checkpoint.safetensors")):
            sys.exit("no checkpoint of the stopped arm")
        if phase == "during the generation speed" and not re.search(r"arm baseline .*\(resumed\)", stdout):
            sys.exit("the finished arm was not resumed:\n" + stdout)
        if phase == "during the classification" and not os.path.exists(
                os.path.join(out, "baseline", "classify", "classify.json")):
            sys.exit("the finished classification was not saved:\n" + stdout)
        cmd = ["experiment", "gain", "--resume", out]
    for other in (["--steps", "20"], ["--quiet"]):
        _, err = run(exe, ["experiment", "gain", "--resume", out] + other, code=2)
        if other[0] not in err:
            sys.exit("--resume with %s: %r" % (other[0], err))
    _, err = run(exe, ["experiment", "gain", "--resume", os.path.join(tmp, "none")], code=2)
    if "experiment.json" not in err:
        sys.exit("--resume of no experiment: %r" % err)
    stdout, _ = run(exe, cmd)
    if not re.search(r"classify baseline .*\(kept\)", stdout):
        sys.exit("the finished classification was not kept:\n" + stdout)
    a, b = (json.load(open(os.path.join(d, "results.json"))) for d in (ref, out))
    for arm in ("baseline", "linear"):
        ra, rb = a["arms"][arm]["runs"][0], b["arms"][arm]["runs"][0]
        for key in ("validation_perplexity", "validation_curve", "per_head", "classification_accuracy"):
            if ra[key] != rb[key]:
                sys.exit("%s: %s differs after the stops and resumes:\n%r\n%r" % (arm, key, ra[key], rb[key]))


def main():
    exe, script, tokenizer, cairo = sys.argv[1:5]
    exe = os.path.abspath(exe)  # some runs start in the temporary folder
    with tempfile.TemporaryDirectory() as tmp:
        wn, corpus, out = (os.path.join(tmp, n) for n in ("wn", "corpus", "out"))
        fake_wordnet(wn)
        subprocess.run([sys.executable, script, "--wordnet", wn, corpus], check=True, capture_output=True)
        tiny = ["--corpus", corpus, "--tokenizer", tokenizer, "--layers", "2", "--hidden", "32", "--heads", "4",
                "--block", "32", "--batch", "4", "--steps", "10", "--measure-every", "2", "--eval-every", "5",
                "--eval-blocks", "4", "--gen-tokens", "8", "--gen-reps", "2", "--probe-docs", "0", "--lr", "3e-3",
                "--seeds", "1", "--classify-steps", "6", "--classify-prefix", "4", "--classify-test", "0"]
        arms = ("baseline", "linear", "selected", "uniform", "decay")
        stdout, _ = run(exe, ["experiment", "gain", "--out", out, "--arms", ",".join(arms), "--quiet"] + tiny,
                        timeout=300)
        report = open(os.path.join(out, "report.md")).read()
        if "prefixcl experiment gain" not in report or "device:" not in report:
            sys.exit("report.md lacks the command line or the device:\n" + report)
        rows = [l for l in report.splitlines() if l.startswith("| ") and not l.startswith("| arm")]
        for arm in arms:
            row = [l for l in rows if l.startswith("| %s |" % arm)]
            if not row:
                sys.exit("no %s row in report.md:\n%s" % (arm, report))
            ppl = float(row[0].split("|")[2])
            if not math.isfinite(ppl) or ppl <= 1:
                sys.exit("%s: perplexity %r" % (arm, row[0]))
        if re.search(r"\b(nan|-?inf)\b", report, re.I):
            sys.exit("a non-finite figure in report.md:\n" + report)
        claims = report[report.index("## The claims"):report.index("## Pictures")]
        if re.search(r"measurement (agrees|disagrees|is inconclusive)", claims) or "no verdict" not in claims:
            sys.exit("one seed must give figures and no verdict:\n" + claims)
        if "raises classification accuracy (89.3" not in claims or "raise it further (91.2" not in claims:
            sys.exit("report.md lacks the classification claims:\n" + claims)
        unigram = re.search(r"unigram perplexity of those validation tokens: ([0-9.]+)", report)
        if not unigram or not float(unigram.group(1)) > 1 or "| arm | validation perplexity (unigram " not in report:
            sys.exit("report.md lacks the unigram perplexity:\n" + report)
        if claims.count("The seed's tuning idea") != 2:
            sys.exit("report.md lacks the uniform and decay arms' lines:\n" + claims)
        if "Selection rule" not in report or "settled" not in report:
            sys.exit("report.md lacks the selection rule or the settled definition")
        res = json.load(open(os.path.join(out, "results.json")))
        cls = res["classification"]
        if not (cls["labels"] == 5 and cls["held_out_examples"] >= 2 and cls["tuning_examples"] >= 2
                and math.isclose(res["unigram_perplexity"], float(unigram.group(1)), rel_tol=1e-3)):
            sys.exit("results.json: %r, unigram %r" % (cls, res["unigram_perplexity"]))
        for arm in arms:
            r0 = res["arms"][arm]["runs"][0]
            acc = r0["classification_accuracy"]
            # the scores' loss of the right labels is the tune job's evaluation of the same examples
            if not (0 <= acc <= 1 and r0["classification_correct"] == round(acc * cls["held_out_examples"])
                    and math.isclose(r0["classification_loss_scored"], r0["classification_loss_after"],
                                     rel_tol=1e-4)):
                sys.exit("results.json %s: classification %r" % (arm, r0))
            if not os.path.exists(os.path.join(out, arm, "classify", "adapter_model.safetensors")):
                sys.exit("no classification adapter in %s/classify" % arm)
        if sorted(res["arms"]) != sorted(arms):
            sys.exit("results.json arms %r" % sorted(res["arms"]))
        for arm in arms:
            a = res["arms"][arm]
            r0 = a["runs"][0]
            if not (math.isfinite(a["validation_perplexity_mean"]) and r0["speed_wall"]["tokens_per_s"] > 0
                    and r0["speed_cpu"]["tokens_per_s"] > 0
                    and 0 <= r0["probe_accuracy"] <= 1 and len(r0["per_head"]["entropy"]) == 5
                    and len(r0["per_head"]["entropy"][0]) == 8):
                sys.exit("results.json %s: %r" % (arm, {k: v for k, v in r0.items() if k != "per_head"}))
        g0 = res["arms"]["uniform"]["runs"][0]["per_head"]["gain"][0]
        if max(abs(g) for g in g0) < 0.01:  # --uniform-init 0.05, after 2 small steps
            sys.exit("the uniform arm's gains start near 0: %r" % g0)
        for arm in ("linear", "selected"):  # the model with its gains folded, timed too
            if not res["arms"][arm]["runs"][0]["speed_folded_cpu"]["tokens_per_s"] > 0:
                sys.exit("no folded speed of %s" % arm)
        if "gains folded" not in report or "Gains can be fixed at inference" not in report:
            sys.exit("report.md lacks the folded model's speed")
        if sum(res["arms"]["selected"]["runs"][0]["selected_heads"]) != 4:
            sys.exit("the selected arm trains %r" % res["arms"]["selected"]["runs"][0]["selected_heads"])
        for arm in arms:
            if not os.path.exists(os.path.join(out, arm, "model.safetensors")):
                sys.exit("no model in %s/" % arm)
        if cairo == "cairo":
            for pic in ("valid_loss.png", "gains_linear.png", "gains_selected.png", "entropy.png",
                        "attention_maps.png"):
                path = os.path.join(out, pic)
                if not os.path.exists(path):
                    sys.exit("no %s: %s" % (pic, stdout))
                w, h = png_size(path)
                if not (300 <= w <= 5000 and 200 <= h <= 8000):
                    sys.exit("%s: %d x %d" % (pic, w, h))

        # refusals, each naming its option
        base = ["experiment", "gain", "--corpus", corpus, "--out", os.path.join(tmp, "o2")]
        for args, name in ((["--arms", "baseline,selected"], "--arms"), (["--arms", "gain"], "--arms"),
                           (["--arms", "linear,linear"], "--arms"), (["--heads", "3", "--hidden", "32"], "--heads"),
                           (["--steps", "2"], "--steps"), (["--top-k", "0"], "--top-k"),
                           (["--lr", "nan"], "--lr"), (["--seeds", "0"], "--seeds"),
                           (["--top-k", "64", "--block", "32"], "--top-k"),
                           (["--measure-every", "50", "--steps", "10"], "--measure-every"),
                           (["--classify-prefix", "30", "--block", "32"], "--classify-prefix")):
            _, err = run(exe, base + args, code=2)
            if name not in err:
                sys.exit("%s: %r" % (" ".join(args), err))
        _, err = run(exe, ["experiment", "gain", "--out", out], code=2)
        if "--corpus" not in err:
            sys.exit("no --corpus: %r" % err)
        _, err = run(exe, ["experiment", "gain", "--corpus", os.path.join(tmp, "none"), "--out", out], code=2)
        if "--corpus" not in err:
            sys.exit("a missing corpus: %r" % err)
        # a corpus file that is a FIFO: refused at once, not read
        fifo_corpus = os.path.join(tmp, "fifo-corpus")
        os.mkdir(fifo_corpus)
        for name in ("valid.txt", "valid_labels.tsv"):
            shutil.copy(os.path.join(corpus, name), fifo_corpus)
        os.mkfifo(os.path.join(fifo_corpus, "train.txt"))
        _, err = run(exe, ["experiment", "gain", "--corpus", fifo_corpus, "--out", out], code=2, timeout=20)
        if "not a regular file: " + os.path.join(fifo_corpus, "train.txt") not in err:
            sys.exit("a FIFO in the corpus: %r" % err)
        _, err = run(exe, ["experiment", "other"], code=2)
        if "gain" not in err:
            sys.exit("an unknown experiment: %r" % err)
        resume_checks(exe, corpus, tokenizer, tmp)
    print("ok")


if __name__ == "__main__":
    main()
