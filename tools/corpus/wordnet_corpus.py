#!/usr/bin/env python3
"""The English corpus of the attention-gain experiment: the glosses of
WordNet 3.0 (Princeton University, WordNet 3.0 license: use, copy, modify and
distribute with its copyright notice; Debian package `wordnet-base`, which
installs /usr/share/wordnet/data.{noun,verb,adj,adv}).

One document per synset, in the files' order: its first words (up to three,
underscores as spaces), a colon, and its gloss (definition and examples),
e.g. "dwarf: a plant or animal that is atypically small". A synset goes to
the validation set when crc32("<pos><offset>") % 20 == 0 (about 5%, the same
on every machine), else to training. The validation documents' lexicographer
file (noun.animal, verb.motion, ...: the synset's category) goes beside them
for a classification probe.

    python3 tools/corpus/wordnet_corpus.py [--wordnet DIR] OUT_DIR
writes OUT_DIR/train.txt, valid.txt and valid_labels.tsv (lexname TAB
document, in valid.txt's order) and prints the counts. Standard library only.
"""
import argparse
import os
import re
import sys
import zlib

POS = ("noun", "verb", "adj", "adv")
# The lexicographer files (lexnames(5WN)), by number.
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
    "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
    "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
    "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
    "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
    "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
SYNTAX_MARKER = re.compile(r"\((a|p|ip)\)$")


def synsets(path, pos):
    """(offset, lexname, document) of every synset line of a data.POS file."""
    with open(path, encoding="utf-8", errors="strict") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("  "):  # the license header
                continue
            head, sep, gloss = line.rstrip("\n").partition(" | ")
            fields = head.split()
            if not sep or len(fields) < 4:
                sys.exit("%s:%d: not a synset line" % (path, n))
            offset, lex, count = fields[0], int(fields[1]), int(fields[3], 16)
            if not 0 <= lex < len(LEXNAMES) or len(fields) < 4 + 2 * count or count == 0:
                sys.exit("%s:%d: bad lexicographer file or word count" % (path, n))
            words = [SYNTAX_MARKER.sub("", fields[4 + 2 * i]).replace("_", " ") for i in range(min(count, 3))]
            gloss = " ".join(gloss.split())
            if gloss:
                yield offset, LEXNAMES[lex], "%s: %s" % (", ".join(words), gloss)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wordnet", default="/usr/share/wordnet", help="the folder of data.noun ... (wordnet-base)")
    ap.add_argument("out")
    args = ap.parse_args()
    missing = [p for p in POS if not os.path.exists(os.path.join(args.wordnet, "data." + p))]
    if missing:
        sys.exit("no %s in %s: install Debian's wordnet-base (apt-get install wordnet-base) or give --wordnet"
                 % (", ".join("data." + p for p in missing), args.wordnet))
    os.makedirs(args.out, exist_ok=True)
    counts = {"train": 0, "valid": 0}
    with open(os.path.join(args.out, "train.txt"), "w", encoding="utf-8") as train, \
            open(os.path.join(args.out, "valid.txt"), "w", encoding="utf-8") as valid, \
            open(os.path.join(args.out, "valid_labels.tsv"), "w", encoding="utf-8") as labels:
        for pos in POS:
            for offset, lexname, doc in synsets(os.path.join(args.wordnet, "data." + pos), pos):
                if zlib.crc32((pos + offset).encode()) % 20 == 0:
                    valid.write(doc + "\n")
                    labels.write("%s\t%s\n" % (lexname, doc))
                    counts["valid"] += 1
                else:
                    train.write(doc + "\n")
                    counts["train"] += 1
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in ("train.txt", "valid.txt"))
    print("wordnet corpus: %d training and %d validation documents, %.1f MB, in %s"
          % (counts["train"], counts["valid"], size / 1e6, args.out))


if __name__ == "__main__":
    main()
