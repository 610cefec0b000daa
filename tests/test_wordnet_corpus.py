#!/usr/bin/env python3
"""tools/corpus/wordnet_corpus.py on a small folder in WordNet's data.POS
format written here (invented glosses): documents of the first three words
and the gloss, the license header skipped, underscores and syntactic
markers undone, the validation split by crc32, its labels beside it, the
same output twice; a malformed line and a missing file named.

usage: test_wordnet_corpus.py SCRIPT   (standard library only)
"""
import os
import subprocess
import sys
import tempfile
import zlib

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"


def line(offset, lex, pos, words, gloss):
    ws = " ".join("%s 0" % w for w in words)
    return "%08d %02d %s %02x %s 000 | %s  \n" % (offset, lex, pos, len(words), ws, gloss)


def main():
    script = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        wn = os.path.join(tmp, "wn")
        os.makedirs(wn)
        docs = {}
        for pos, lex, letter in (("noun", 5, "n"), ("verb", 38, "v"), ("adj", 0, "a"), ("adv", 2, "r")):
            with open(os.path.join(wn, "data." + pos), "w") as f:
                f.write(HEADER * 3)
                for i in range(60):
                    words = ["%s_word_%d" % (pos, i), "other(p)", "third", "fourth"][: 1 + i % 4]
                    f.write(line(1000 + 37 * i, lex, letter, words, "a %s thing   number %d; \"an example\"" % (pos, i)))
                    docs[(pos, "%08d" % (1000 + 37 * i))] = (lex, words)
        out = os.path.join(tmp, "out")
        p = subprocess.run([sys.executable, script, "--wordnet", wn, out], capture_output=True, text=True)
        if p.returncode != 0 or "documents" not in p.stdout:
            sys.exit("the script failed: %s%s" % (p.stdout, p.stderr))
        train = open(os.path.join(out, "train.txt")).read().splitlines()
        valid = open(os.path.join(out, "valid.txt")).read().splitlines()
        labels = [l.split("\t") for l in open(os.path.join(out, "valid_labels.tsv")).read().splitlines()]
        want_valid = [k for k in docs if zlib.crc32((k[0] + k[1]).encode()) % 20 == 0]
        if len(valid) != len(want_valid) or len(train) + len(valid) != 240 or not valid:
            sys.exit("split: %d train, %d valid, want %d valid" % (len(train), len(valid), len(want_valid)))
        if train[0] != 'noun word 0: a noun thing number 0; "an example"':
            sys.exit("first document %r" % train[0])
        if not any(d.startswith("noun word 1, other: ") for d in train + valid):
            sys.exit("two words and a syntactic marker: %r" % train[:3])
        if any(len(d.split(":")[0].split(", ")) > 3 for d in train + valid):
            sys.exit("more than three words in a document")
        if [d for _, d in labels] != valid or not all(l in ("noun.animal", "verb.motion", "adj.all", "adv.all")
                                                      for l, _ in labels):
            sys.exit("labels %r" % labels[:3])
        first = open(os.path.join(out, "train.txt")).read()
        subprocess.run([sys.executable, script, "--wordnet", wn, out], check=True, capture_output=True)
        if open(os.path.join(out, "train.txt")).read() != first:
            sys.exit("a second run wrote other text")
        with open(os.path.join(wn, "data.verb"), "a") as f:
            f.write("00009999 77 v 01 bad 0 000 | a lexicographer file that does not exist\n")
        p = subprocess.run([sys.executable, script, "--wordnet", wn, out], capture_output=True, text=True)
        if p.returncode == 0 or "data.verb:64" not in p.stderr:
            sys.exit("a bad line: %d %r" % (p.returncode, p.stderr))
        os.remove(os.path.join(wn, "data.adv"))
        p = subprocess.run([sys.executable, script, "--wordnet", wn, out], capture_output=True, text=True)
        if p.returncode == 0 or "wordnet-base" not in p.stderr:
            sys.exit("a missing file: %r" % p.stderr)
    print("ok")


if __name__ == "__main__":
    main()
