#!/usr/bin/env python3
"""Text in, numbers out: tokenize a sentence with the model folder's
tokenizer, score it (the causal-LM loss), and print where each head of each
layer attends (entropy, top-1 mass) as numpy arrays.

usage: inspect_heads.py [MODEL_DIR]   (default: the tiny GPT-2 of the tests)"""
import sys
from pathlib import Path

import numpy as np

import prefixcl

ROOT = Path(__file__).resolve().parents[2]
model_dir = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "tests/fixtures/generate/gpt2")

with prefixcl.Runtime() as rt, prefixcl.Tokenizer(model_dir) as tok, \
        prefixcl.load_model(rt, model_dir) as model:
    print(f"prefixcl {prefixcl.__version__} on {rt.device.device_name}")
    ids = tok.encode("The quick brown fox jumps over the lazy dog.")
    print(f"{len(ids)} tokens: {ids}")
    print(f"loss {model.loss([ids]):.4f}")
    stats = model.head_stats([ids], top_k=1)  # each [layers, heads]
    np.set_printoptions(precision=3)
    print("entropy per layer and head\n", stats.entropy)
    print("top-1 mass per layer and head\n", stats.top_k_mass)
    logits = model.last_logits([ids])[0]
    print("most likely next token:", repr(tok.decode([int(logits.argmax())])))
