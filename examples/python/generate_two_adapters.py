#!/usr/bin/env python3
"""Generate with two prefix adapters (and the bare model) in one batch from
Python: the adapters are PEFT folders held once on the device in a bank,
and each prompt of the batch picks its own. Then the same requests through
the scheduler, which batches requests as they come on its own thread.

usage: generate_two_adapters.py [MODEL_DIR ADAPTER0 ADAPTER1]
       (default: the tiny GPT-2 of the tests and two of its adapters)"""
import sys
from pathlib import Path

import prefixcl

GPT2 = Path(__file__).resolve().parents[2] / "tests/fixtures/generate/gpt2"
model_dir, a0, a1 = (sys.argv[1:4] if len(sys.argv) > 3 else
                     (str(GPT2), str(GPT2 / "adapter0"), str(GPT2 / "adapter1")))

with prefixcl.Runtime() as rt, prefixcl.load_model(rt, model_dir) as model, \
        prefixcl.Tokenizer(model_dir) as tok:
    prompts = ["the quick brown fox", "the quick brown fox", "Hello, world"]
    texts = prefixcl.generate(model, prompts, adapters=[a0, a1, None], tokenizer=tok,
                              max_new_tokens=7)
    for prompt, adapter, text in zip(prompts, ("adapter0", "adapter1", "none"), texts):
        print(f"{adapter:>8}: {prompt!r} -> {text!r}")

    with prefixcl.AdapterBank(model, 2) as bank:
        entries = [bank.add(a0), bank.add(a1)]
        with prefixcl.Scheduler(model, bank, slots=2, max_len=32) as scheduler:
            requests = [scheduler.submit(tok.encode(p), adapter=e, max_new_tokens=7)
                        for p, e in zip(prompts[:2], entries)]
            for r, text in zip(requests, texts):
                assert tok.decode(r.wait()) == text  # the same tokens as in one batch
            print("scheduler:", scheduler.stats()["generated_tokens"], "tokens, as above")
