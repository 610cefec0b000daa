#!/usr/bin/env python3
"""Prefix-tune a model on a text file from Python, printing each step, then
score the adapter with the evaluation job: what `prefixcl tune` and
`prefixcl eval` do, with the options as keyword arguments. Ctrl-C stops at
the next step and leaves the checkpoint (resume=True continues).

usage: tune_adapter.py [OUT_DIR]   (default: a temporary folder, removed)"""
import atexit
import shutil
import sys
import tempfile
from pathlib import Path

import prefixcl

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "tests/fixtures/generate/gpt2")  # a Hugging Face folder with tokenizer.json
TRAIN, EVAL = str(ROOT / "data/demo/train.txt"), str(ROOT / "data/demo/eval.txt")
if len(sys.argv) > 1:
    out = sys.argv[1]
else:
    out = tempfile.mkdtemp(prefix="prefixcl-tune-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)


def progress(step):
    print(f"step {step.step}/{step.steps}  loss {step.loss:.4f}  grad norm {step.grad_norm:.3f}")
    return True  # False would stop here, checkpoint written


with prefixcl.Runtime() as rt:
    result = prefixcl.tune(rt, MODEL, TRAIN, out, eval_data=EVAL, prefix_len=4, hidden=16,
                           batch=4, max_length=32, steps=6, warmup_steps=1, on_step=progress)
    print(f"evaluation loss {result.eval_before:.4f} -> {result.eval_after:.4f}; adapter in {out}")
    e = prefixcl.evaluate(rt, MODEL, EVAL, adapter=out, max_length=result.max_length)
    print(f"perplexity {e.perplexity:.1f} frozen, {e.adapter_perplexity:.1f} with the adapter")
