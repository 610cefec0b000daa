#!/usr/bin/env python3
"""`prefixcl tokenize` as a user runs it on the committed tokenizer fixtures
(tests/fixtures/tokenizers, ids by HF tokenizers): the ids with the special
tokens (as tokenizer(text) gives them) and their pieces (the vocabulary's
strings, as convert_ids_to_tokens gives them; control bytes escaped, one
line per token), --no-special, --ids, --file with --count, --file with --out
(token shards in llm.c's layout), and the messages of a folder without a
tokenizer, of missing options and of a --file that is not a regular file.

usage: test_tokenize_cli.py PREFIXCL TOKENIZER_FIXTURES_DIR   (standard library only)
"""
import json
import os
import struct
import sys
import tempfile

from cli_run import run


def escaped(piece):
    out = []
    for ch in piece:
        if ch in "\n\t\r\\":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def check_folder(exe, folder, tmp):
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    pieces = {i: t for t, i in tok["model"]["vocab"].items()}
    for a in tok.get("added_tokens", []):
        pieces[a["id"]] = a["content"] if not a.get("normalized") else None
    with open(os.path.join(folder, "cases.jsonl"), encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    # texts a shell can pass: no NUL; some with newlines and tabs
    cases = [c for c in cases if c["text"] and "\0" not in c["text"]]
    if len(cases) < 10:
        sys.exit("%s: too few cases" % folder)
    for c in cases[:: max(1, len(cases) // 12)]:
        text = c["text"]
        out, _ = run(exe, ["tokenize", "--model", folder, "--text", text])
        lines = out.split("\n")
        if lines[-1] != "" or len(lines) - 1 != len(c["ids_special"]):
            sys.exit("%s %r: %r, HF ids %r" % (folder, text, out, c["ids_special"]))
        for line, i in zip(lines, c["ids_special"]):
            got_id, got_piece = line.split("\t")
            if int(got_id) != i or (pieces.get(i) is not None and got_piece != escaped(pieces[i])):
                sys.exit("%s %r: line %r, HF id %d piece %r" % (folder, text, line, i, pieces.get(i)))
        out, _ = run(exe, ["tokenize", "--model", folder, "--text", text, "--no-special", "--ids"])
        if out != " ".join(str(i) for i in c["ids"]) + "\n":
            sys.exit("%s %r --no-special --ids: %r, HF %r" % (folder, text, out, c["ids"]))
    # a file, whole: its token count
    text = "".join(c["text"] for c in cases[:20])
    path = os.path.join(tmp, "text.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    by_text, _ = run(exe, ["tokenize", "--model", folder, "--text", text, "--ids"])
    count, _ = run(exe, ["tokenize", "--model", folder, "--file", path, "--count"])
    if count != "%d\n" % len(by_text.split()):
        sys.exit("%s --file --count %r, --text gives %d ids" % (folder, count, len(by_text.split())))


def check_shards(exe, folder, tmp):
    """--out: llm.c's header and uint16 tokens, each document (line) then the EOS, in
    shards of --shard-tokens."""
    lines = ["The river bank.", "Hello world 1234!", "x y z"]
    path = os.path.join(tmp, "docs.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    eos, _ = run(exe, ["tokenize", "--model", folder, "--text", "<|endoftext|>", "--ids"])
    want = []
    for line in lines:
        ids, _ = run(exe, ["tokenize", "--model", folder, "--text", line, "--ids"])
        want += [int(i) for i in ids.split()] + [int(eos)]
    prefix = os.path.join(tmp, "docs")
    out, _ = run(exe, ["tokenize", "--model", folder, "--file", path, "--out", prefix, "--shard-tokens", "7"])
    shards = (len(want) + 6) // 7
    if not out.startswith("wrote %d shards" % shards):
        sys.exit("tokenize --out: %r" % out)
    got = []
    for i in range(shards):
        with open("%s_%06d.bin" % (prefix, i), "rb") as f:
            b = f.read()
        head = struct.unpack("<256i", b[:1024])
        n = head[2]
        if head[:2] != (20240520, 1) or len(b) != 1024 + 2 * n or n != min(7, len(want) - 7 * i):
            sys.exit("shard %d: header %r, %d bytes" % (i, head[:3], len(b)))
        got += list(struct.unpack("<%dH" % n, b[1024:]))
    if got != want:
        sys.exit("shard tokens %r, expected %r" % (got, want))
    _, err = run(exe, ["tokenize", "--model", folder, "--text", "hi", "--out", prefix], 2)
    if "--out takes --file" not in err:
        sys.exit("--out with --text: %r" % err)


def main():
    exe, fix = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("llama3", "llama2", "gpt2"):
            check_folder(exe, os.path.join(fix, name), tmp)
        check_shards(exe, os.path.join(fix, "gpt2"), tmp)
        _, err = run(exe, ["tokenize", "--model", tmp, "--text", "hi"], 1)
        if "tokenizer.json" not in err:
            sys.exit("a folder without a tokenizer: %r" % err)
        _, err = run(exe, ["tokenize", "--model", os.path.join(fix, "gpt2")], 2)
        if "--text or --file" not in err:
            sys.exit("no text: %r" % err)
        _, err = run(exe, ["tokenize", "--model", os.path.join(fix, "gpt2"), "--file", os.path.join(tmp, "none")], 1)
        if "--file: cannot open" not in err:
            sys.exit("a missing file: %r" % err)
        # a FIFO (a read would wait for a writer) and a device (a read would never end)
        fifo = os.path.join(tmp, "fifo")
        os.mkfifo(fifo)
        for path in (fifo, "/dev/zero"):
            _, err = run(exe, ["tokenize", "--model", os.path.join(fix, "gpt2"), "--file", path], 1, timeout=20)
            if "--file: not a regular file: " + path not in err:
                sys.exit("--file %s: %r" % (path, err))
    print("ok")


if __name__ == "__main__":
    main()
