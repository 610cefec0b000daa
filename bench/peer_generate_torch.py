#!/usr/bin/env python3
"""transformers + PEFT peer of bench/bench_generate: greedy generation on a
random-init GPT2LMHeadModel (GPT-2 small's config), float32 on the CPU, each
request with its own prefix of 20 positions (a PEFT prefix-tuning adapter
per request: PEFT's get_prompt layout, the prefixes of request b stacked
into one DynamicCache), prompts of N tokens, NEW new tokens.

Prefill tokens/s: B*N over the time of generate(max_new_tokens=1); decode
tokens/s: B*(NEW-1) over the time generate(max_new_tokens=NEW) takes beyond
that; medians over the runs after one warm-up run. Beside bench_generate's
figures from its --json output when given.

generate runs on the base model with the prefixes as its cache: PEFT's own
PeftModel.generate (transformers 5.24, peft 0.21) hands the prefix over as the
deprecated past_key_values next to generate's `cache` and the model drops it.

    python3 bench/peer_generate_torch.py [--batch 1,8] [--tokens 128] [--new 32]
                                         [--runs 3] [--threads N] [--json bench_generate.json]

Needs only the standard library to show --help; torch, transformers and peft
are imported lazily.
"""
import argparse
import json
import statistics
import sys
import time

PREFIX = 20


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--json", help="bench_generate --json output to compare with")
    args = ap.parse_args()
    batches = [int(b) for b in args.batch.split(",")]

    import torch
    from peft import PrefixTuningConfig, TaskType, get_peft_model
    from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    base = GPT2LMHeadModel(GPT2Config()).eval()
    # one PEFT adapter per request (random prompt embeddings), as prefixcl's bank holds them
    adapters = []
    for b in range(max(batches)):
        peft = get_peft_model(base, PrefixTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=PREFIX))
        with torch.no_grad():
            emb = peft.prompt_encoder["default"].embedding.weight
            emb.copy_(torch.randn(emb.shape) * 0.5)
            adapters.append(peft.get_prompt(batch_size=1))
        base = peft.get_base_model()

    def cache_for(B):
        cache = DynamicCache()
        for layer in range(base.config.n_layer):
            k = torch.cat([adapters[b].layers[layer].keys for b in range(B)])
            v = torch.cat([adapters[b].layers[layer].values for b in range(B)])
            cache.update(k, v, layer)
        return cache

    def timed(ids, new):
        B = ids.shape[0]
        mask = torch.ones(B, PREFIX + ids.shape[1], dtype=torch.long)
        with torch.no_grad():
            t0 = time.perf_counter()
            base.generate(input_ids=ids, attention_mask=mask, cache=cache_for(B), do_sample=False,
                          max_new_tokens=new, min_new_tokens=new, pad_token_id=0)
            return time.perf_counter() - t0

    ours = {}
    if args.json:
        with open(args.json) as f:
            for r in json.load(f)["results"]:
                ours[r["batch"]] = r
    print("transformers + PEFT generate, GPT-2 small (random weights), prefix %d, prompt %d, %d new tokens, "
          "torch %s, %d threads" % (PREFIX, args.tokens, args.new, torch.__version__, torch.get_num_threads()))
    for B in batches:
        ids = torch.randint(0, 50257, (B, args.tokens))
        pre, dec = [], []
        for run in range(args.runs + 1):
            t1 = timed(ids, 1)
            tn = timed(ids, args.new)
            if not run:
                continue
            if tn <= t1:  # a disturbed pair: the longer run was not longer
                print("batch %d run %d left out: %d tokens took %.3f s, 1 token %.3f s"
                      % (B, run, args.new, tn, t1), file=sys.stderr)
                continue
            pre.append(B * args.tokens / t1)
            dec.append(B * (args.new - 1) / (tn - t1))
        if not pre:
            print("batch %2d: every run was disturbed (see above)" % B)
            continue
        p, d = statistics.median(pre), statistics.median(dec)
        line = "batch %2d: prefill %8.1f tokens/s, decode %8.1f tokens/s" % (B, p, d)
        if B in ours:
            line += "   prefixcl: prefill %.1f (%.2fx), decode %.1f (%.2fx)" % (
                ours[B]["prefill_tokens_per_s"], ours[B]["prefill_tokens_per_s"] / p,
                ours[B]["decode_tokens_per_s"], ours[B]["decode_tokens_per_s"] / d)
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
