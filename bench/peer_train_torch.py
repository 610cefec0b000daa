#!/usr/bin/env python3
"""PyTorch peer of bench/bench_train: one full-training step of GPT-2 small
(random init from GPT2Config(), float32, no dropout) on the CPU at B=8, N=128:
forward with labels, backward, torch.nn.utils.clip_grad_norm_(1.0),
torch.optim.AdamW (lr 1e-4, weight decay 0.01; fused when this torch has a
fused CPU AdamW, the fastest exactly equivalent form, else foreach), and
zero_grad(set_to_none). Median ms after warm-up steps, and beside it
bench_train's figure from its --json run with the ratio.

    python3 bench/peer_train_torch.py [--json bench_train.json] [--threads N]

Needs only the standard library to show --help; torch and transformers are
imported lazily.
"""
import argparse
import json
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="bench_train --json output to compare with")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg)
    model.train()
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
        kind = "fused"
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, foreach=True)
        kind = "foreach"
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.tokens))
    times = []
    for it in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        ms = (time.perf_counter() - t0) * 1e3
        if it >= args.warmup:
            times.append(ms)
        print("step %d: loss %.4f, %.0f ms" % (it - args.warmup, loss.item(), ms), file=sys.stderr)
    med = statistics.median(times)
    print("torch %s, %d threads, AdamW %s" % (torch.__version__, torch.get_num_threads(), kind))
    print("test: GPT-2 small full-training step, B=%d N=%d" % (args.batch, args.tokens))
    print("  torch step            %10.2f ms  (%.0f tokens/s)" % (med, args.batch * args.tokens / (med / 1e3)))
    if args.json:
        with open(args.json) as f:
            ours = json.load(f)
        print("  prefixcl step         %10.2f ms  (%s)" % (ours["step_ms"], ours["device"]))
        print("  speed, prefixcl / torch: %.2fx" % (med / ours["step_ms"]))


if __name__ == "__main__":
    main()
