#!/usr/bin/env python3
"""Runs test_chart (which draws every picture into OUT and checks the PNGs),
then parses each SVG it wrote and checks its size, its <title> and that the
labels the fixed data must produce are in its text.

usage: check_charts.py TEST_CHART OUT cairo|none
"""
import subprocess
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"

# file -> (title, labels that must appear as <text>)
EXPECTED = {
    "loss.svg": ("prefixcl train: loss (MSE against the teacher)",
                 ["step", "MSE loss", "learning rate, gradient norm", "training loss",
                  "held-out loss", "learning rate (right)",
                  "gradient norm (before clipping) (right)",
                  "3 layers, prefix 8, batch 4 x 24 tokens, seed 5"]),
    "attention.svg": ("attention mass on the prefix per layer (mean over heads)",
                      ["layer 0", "layer 1", "layer 2", "teacher", "student (baked)",
                       "prefix mass", "entropy (nats)",
                       "attention entropy per layer (mean over heads)"]),
    "gains.svg": ("gain per layer and head (tanh mode: gamma = 1 + tanh(g))",
                  ["learned (student)", "hidden (teacher)", "layer 0", "layer 2", "head 0",
                   "head 3", "gain parameter g"]),
    "tune-loss.svg": ("prefixcl tune: token loss",
                      ["step", "mean token loss (nats)", "gradient norm", "training loss",
                       "gradient norm (before clipping) (right)", "evaluation loss",
                       "3 layers, 4 heads, 40 of 40 steps"]),
    "tune-attention.svg": ("attention mass on the prefix per layer",
                           ["base", "tuned", "layer", "prefix mass", "0", "2",
                            "mean of the heads, on the first evaluation batch"]),
    "tune-gains.svg": ("learned gain per layer and head",
                       ["layer", "head", "gain parameter g", "0", "3"]),
    "attn-head.svg": ("layer 1, head 2, gain 1.25",
                      ["The", "\u0120cat", "\u0120sat", "a<b&c", "p0", "p2", "prefix", "query",
                       "key", "attention probability"]),
    "attn-grid.svg": ("layer 1: all heads",
                      ["head 0", "head 1", "head 2", "prefix", "attention probability", "a<b&c"]),
    # a log axis over a narrow range: several labelled ticks (the right axis)
    "grad-decade.svg": ("a gradient norm within a decade", ["0.6", "0.8", "1", "2"]),
    "grad-narrow.svg": ("a gradient norm within a factor 1.3", ["1.5", "1.6", "1.7", "1.8", "1.9"]),
    "legend-below.svg": ("no free corner", ["near the top", "near the bottom", "in the middle"]),
    # twelve heads of 10 x 30 tokens: every token labelled
    "attn-grid-12.svg": ("twelve heads, every token",
                         ["q%d" % i for i in range(10)] + ["k%d" % j for j in range(30)]),
    "bench-compare.svg": ("prefixcl bench: figure per test and device",
                          ["sgemm.1024", "copy", "layer.step", "120.5 GFLOP/s", "12.5 GB/s",
                           "107.6 GFLOP/s", "30.1 % of FMA peak", "100.0 % of copy bandwidth",
                           "+12.0 %", "-20.0 %", "skipped: not built",
                           "sgemm.512", "136.2 GFLOP/s", "275.9 % of FMA peak",
                           "1 [0:0] Chart Test Device: this run",
                           "1: saved run 2026-11-30T09:00:00+0000"]),
}


def check_svg(path, title, labels):
    root = ET.parse(path).getroot()
    assert root.tag == SVG + "svg", f"{path}: root is {root.tag}"
    for dim in ("width", "height"):
        value = float(root.get(dim, "0").removesuffix("pt"))
        assert value >= 150, f"{path}: {dim} {value}"
    titles = [t.text for t in root.iter(SVG + "title")]
    assert titles == [title], f"{path}: titles {titles}, expected [{title!r}]"
    texts = {t.text for t in root.iter(SVG + "text")}
    missing = [label for label in labels if label not in texts]
    assert not missing, f"{path}: labels missing: {missing}\n  present: {sorted(texts)}"
    # the glyphs themselves are drawn (cairo writes them as paths)
    assert any(True for _ in root.iter(SVG + "path")), f"{path}: nothing drawn"


def text_y(path, label):
    root = ET.parse(path).getroot()
    ys = [float(t.get("y")) for t in root.iter(SVG + "text") if t.text == label]
    assert ys, f"{path}: no {label!r}"
    return min(ys)


def check_legend_below(path):
    """No corner of the plot is free: the legend's entries sit under the x
    axis's label, outside the plot."""
    below = text_y(path, "step")
    for entry in ("near the top", "near the bottom", "in the middle"):
        y = text_y(path, entry)
        assert y > below, f"{path}: {entry!r} at y {y}, inside the plot (x label at {below})"


def main():
    exe, out, mode = sys.argv[1:4]
    rc = subprocess.call([exe, out, mode])
    if rc != 0:
        return rc
    if mode != "cairo":
        return 0
    for name, (title, labels) in EXPECTED.items():
        check_svg(f"{out}/{name}", title, labels)
        print(f"ok {name}: {len(labels)} labels")
    check_legend_below(f"{out}/legend-below.svg")
    print("ok legend-below.svg: the legend under the plot")
    return 0


if __name__ == "__main__":
    sys.exit(main())
