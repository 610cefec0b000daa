#!/usr/bin/env python3
"""prefixcl generate and eval on the tiny GPT-2 fixture with its tokenizer
(tests/fixtures/generate/gpt2, made by make_generate_fixture.py): greedy
text equals HF's decode of HF generate (text.txt), a batch of prompts x
adapters prints a labelled block per request, eval prints loss and perplexity with and without the
adapter, bad options and adapters fail with a message.

usage: test_generate_cli.py PREFIXCL FIXTURE_DIR   (standard library only)
"""
import json
import math
import os
import re
import sys
import tempfile

from cli_run import run


def main():
    exe, fix = sys.argv[1], sys.argv[2]
    model = os.path.join(fix, "gpt2")
    with open(os.path.join(model, "text.txt")) as f:
        cases = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for adapter, prompt, expect in cases:
        prompt, expect = json.loads(prompt), json.loads(expect)
        args = ["generate", "--model", model, "--prompt", prompt, "--max-new-tokens", "7"]
        if adapter != "-":
            args += ["--adapter", os.path.join(model, adapter)]
        out, err = run(exe, args)
        if out != expect + "\n":
            sys.exit("%s %r: %r, HF %r" % (adapter, prompt, out, expect))
        if not re.search(r"prefill: \d+ tokens, [0-9.]+ tokens/s; decode: 6 tokens, [0-9.]+ tokens/s", err):
            sys.exit("no tokens/s line: %r" % err)

    # two prompts x two adapters in one batch, each labelled and equal to its single run
    a0, a1 = os.path.join(model, "adapter0"), os.path.join(model, "adapter1")
    out, _ = run(exe, ["generate", "--model", model, "--adapter", a0, "--adapter", a1,
                       "--prompt", "the quick brown fox", "--prompt", "Hello, world", "--max-new-tokens", "7"])
    blocks = re.findall(r'(?:^|\n)=== prompt (\d+): "(.*?)" \| adapter (\S+) ===\n(.*?)\n'
                        r'--- 7 tokens, stop: length, [0-9.]+ tokens/s ---\n', out, re.S)
    if [(b[0], b[1], b[2]) for b in blocks] != [("0", "the quick brown fox", a0), ("0", "the quick brown fox", a1),
                                                ("1", "Hello, world", a0), ("1", "Hello, world", a1)]:
        sys.exit("batch output: %r" % out)
    single = {(a, json.loads(p)): json.loads(e) for a, p, e in cases}
    for _, prompt, adapter, text in blocks[1::2]:
        if text != single[("adapter1", prompt)]:
            sys.exit("batch %r != single %r" % (text, single[("adapter1", prompt)]))

    # eval: a frozen and an adapted loss, perplexity = exp(loss)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "eval.txt")
        with open(data, "w") as f:
            f.write("the quick brown fox jumps over the lazy dog\nHello, world\nsketched harbour\n")
        out, _ = run(exe, ["eval", "--model", model, "--adapter", a1, "--data", data, "--batch", "2"])
        m = re.findall(r"loss ([0-9.]+), perplexity ([0-9.]+)", out)
        if len(m) != 2 or "frozen model" not in out or "with " + a1 not in out:
            sys.exit("eval output: %r" % out)
        for loss, ppl in m:
            if abs(math.exp(float(loss)) - float(ppl)) > 1e-3 * float(ppl):
                sys.exit("perplexity %s is not exp(%s)" % (ppl, loss))
        if m[0][0] == m[1][0]:
            sys.exit("the adapter does not change the loss: %r" % out)
        # batch size does not change the mean
        out1, _ = run(exe, ["eval", "--model", model, "--data", data, "--batch", "3"])
        if re.findall(r"loss ([0-9.]+)", out1)[0][:6] != m[0][0][:6]:
            sys.exit("eval depends on --batch: %r vs %r" % (out1, out))
        # --storage: half and bfloat16 weights score within their rounding of float32's
        for storage in ("f16", "bf16"):
            out2, _ = run(exe, ["eval", "--model", model, "--data", data, "--storage", storage])
            loss2 = float(re.findall(r"loss ([0-9.]+)", out2)[0])
            if abs(loss2 - float(m[0][0])) > 1e-2 * float(m[0][0]):
                sys.exit("eval --storage %s: %r vs %r" % (storage, out2, out))
        _, err = run(exe, ["eval", "--model", model, "--data", data, "--storage", "q4"], 2)
        if "--storage" not in err:
            sys.exit("eval --storage q4: %r" % err)
        _, err = run(exe, ["generate", "--model", model, "--prompt", "hello", "--kv-dtype", "q8_0"], 2)
        if "--kv-dtype" not in err:
            sys.exit("generate --kv-dtype q8_0: %r" % err)
        out2, _ = run(exe, ["generate", "--model", model, "--prompt", "hello", "--max-new-tokens", "3",
                            "--storage", "bf16"])
        if not out2.strip():
            sys.exit("generate --storage bf16 printed nothing")

    # --prompts FILE: every line a prompt, however many (in batches), however long
    with tempfile.TemporaryDirectory() as tmp:
        one = ["generate", "--model", model, "--max-new-tokens", "1"]
        _, err = run(exe, one + ["--prompt", "hello world"])
        single = int(re.search(r"prefill: (\d+) tokens", err).group(1))
        many = os.path.join(tmp, "many.txt")
        with open(many, "w") as f:
            f.write("hello world\n" * 70)
        _, err = run(exe, one + ["--prompts", many])
        got = int(re.search(r"prefill: (\d+) tokens", err).group(1))
        if got != 70 * single:
            sys.exit("--prompts with 70 lines: %d prefill tokens, %d expected: %r" % (got, 70 * single, err))
        long = os.path.join(tmp, "long.txt")
        with open(long, "w") as f:
            f.write("short\r\n" + "a" * 9000 + "\n")
        _, err = run(exe, one + ["--prompts", long], 1)
        if "long.txt:2: a prompt of 9000 tokens" not in err or not re.search(r"at most \d+ fit", err):
            sys.exit("a line of 9000 bytes: %r" % err)
        nul = os.path.join(tmp, "nul.txt")
        with open(nul, "wb") as f:
            f.write(b"ok\nab\0cd\n")
        _, err = run(exe, one + ["--prompts", nul], 1)
        if "nul.txt:2: the line holds a NUL byte" not in err:
            sys.exit("a line with a NUL byte: %r" % err)
        _, err = run(exe, one + ["--prompts", os.path.join(tmp, "absent.txt")], 1)
        if "--prompts" not in err or "absent.txt" not in err:
            sys.exit("a missing --prompts file: %r" % err)
        # a FIFO (a read would wait for a writer) and a device (a read would never end)
        fifo = os.path.join(tmp, "fifo")
        os.mkfifo(fifo)
        for path in (fifo, "/dev/zero"):
            _, err = run(exe, one + ["--prompts", path], 1, timeout=20)
            if "--prompts: not a regular file: " + path not in err:
                sys.exit("--prompts %s: %r" % (path, err))
        _, err = run(exe, one + ["--prompt", "x"] * 65, 2)
        if "at most 64 --prompt options" not in err:
            sys.exit("65 --prompt options: %r" % err)

    # errors
    _, err = run(exe, ["generate", "--model", model], 2)
    _, err = run(exe, ["generate", "--model", model, "--prompt-ids", "5 99999"], 1)
    if "prompt-ids" not in err:
        sys.exit("bad ids: %r" % err)
    # one strict parser for every number and id list (tools/common/cli.h), the option named
    for opt, val in (("--temperature", ""), ("--top-p", ""), ("--temperature", " 1"), ("--top-p", "0.5x"),
                     ("--temperature", "nan")):
        _, err = run(exe, ["generate", "--model", model, "--prompt", "hi", opt, val], 2)
        if opt not in err:
            sys.exit("%s %r: %r" % (opt, val, err))
    for ids in ("1,,2", ",1", "1,", "1, ,2", "+1"):
        _, err = run(exe, ["generate", "--model", model, "--prompt-ids", ids, "--max-new-tokens", "1"], 1)
        if "--prompt-ids" not in err:
            sys.exit("--prompt-ids %r: %r" % (ids, err))
    _, err = run(exe, ["generate", "--model", model, "--adapter", os.path.join(fix, "llama", "adapter0"),
                       "--prompt", "hi"], 1)
    if "token_dim" not in err:
        sys.exit("mismatched adapter: %r" % err)
    _, err = run(exe, ["generate", "--model", os.path.join(fix, "llama"), "--prompt", "hi"], 1)
    if "tokenizer" not in err:
        sys.exit("no tokenizer: %r" % err)
    out, _ = run(exe, ["generate", "--model", os.path.join(fix, "llama"), "--prompt-ids", "5 17 3 44 9",
                       "--max-new-tokens", "7"])
    with open(os.path.join(fix, "llama", "expected.txt")) as f:
        first = f.readline().rstrip("\n").split("\t")
    if out.strip() != first[2]:
        sys.exit("ids output %r, HF %r" % (out, first[2]))
    print("ok")


if __name__ == "__main__":
    main()
