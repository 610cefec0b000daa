#!/usr/bin/env python3
"""Pre-train a small GPT-2 from its config.json alone with a learnable gain
per head, from Python: the gains of every step come back as numpy arrays,
and the output folder (a Hugging Face model with gains.safetensors beside
it) loads again.

usage: pretrain_with_gains.py [OUT_DIR]   (default: a temporary folder, removed)"""
import atexit
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

import prefixcl

ROOT = Path(__file__).resolve().parents[2]
if len(sys.argv) > 1:
    out = sys.argv[1]
else:
    out = tempfile.mkdtemp(prefix="prefixcl-pretrain-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)

with prefixcl.Runtime() as rt:
    r = prefixcl.pretrain(rt, str(ROOT / "data/demo/train.txt"), out,
                          config=str(ROOT / "examples/tiny-gpt2"),
                          tokenizer=str(ROOT / "data/demo"), block=32, batch=4, steps=12,
                          lr=3e-3, warmup_steps=2, gain_mode="linear", gain_ramp_steps=4,
                          on_step=lambda s: print(f"step {s.step}  loss {s.loss:.4f}"))
    print(f"evaluation loss {r.eval_losses[0]:.4f} -> {r.eval_losses[-1]:.4f}")
    np.set_printoptions(precision=4, suppress=True)
    print("gains after the last step [layers, heads]:\n", r.gains[-1])
    gains = prefixcl.read_gains(out, r.shape.layers, r.shape.heads, r.shape.head_dim)
    with prefixcl.load_model(rt, out) as model:
        ids = [[1, 2, 3, 4, 5, 6, 7, 8]]
        print(f"loss of a row with the gains {model.loss(ids, prefix=gains.prefix()):.4f}, "
              f"without {model.loss(ids):.4f}")
