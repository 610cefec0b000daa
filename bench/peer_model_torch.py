#!/usr/bin/env python3
"""PyTorch + PEFT peer of bench/bench_model: one prefix-tuning step (forward,
loss, backward, AdamW) of a random-init GPT2LMHeadModel (GPT-2 small's
config) with PEFT's PrefixTuningConfig (20 virtual tokens, prefix_projection,
encoder_hidden_size 512) at B=4, N=128 on the CPU, float32; median ms after
warm-up steps, and beside it bench_model's figure from its --json run with
the ratio.

PEFT's prefix encoder embeds the virtual tokens in token_dim = 768 (not 512
as the prefix encoder does), so it trains 9,864,704 parameters where
prefixcl's encoder trains 9,728,512; the step's cost is dominated by the
frozen model either way.

    python3 bench/peer_model_torch.py [--json bench_model.json] [--threads N]

Needs only the standard library to show --help; torch, transformers and peft
are imported lazily.
"""
import argparse
import json
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="bench_model --json output to compare with")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()

    import torch
    from peft import PrefixTuningConfig, TaskType, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    base = GPT2LMHeadModel(GPT2Config())
    base.eval()  # no dropout: the same math as prefixcl's step
    cfg = PrefixTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=20, prefix_projection=True,
                             encoder_hidden_size=512)
    model = get_peft_model(base, cfg)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    ids = torch.randint(0, 50257, (args.batch, args.tokens))
    times = []
    for it in range(-args.warmup, args.steps):
        t0 = time.perf_counter()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        dt = (time.perf_counter() - t0) * 1e3
        print(f"step {it}: loss {out.loss.item():.4f}, {dt:.0f} ms", file=sys.stderr)
        if it >= 0:
            times.append(dt)
    torch_ms = statistics.median(times)
    print(f"device: CPU (torch {torch.__version__}, {torch.get_num_threads()} threads)")
    print(f"test: GPT-2 small prefix-tuning step, B={args.batch} N={args.tokens} P=20, PEFT prefix_projection "
          f"(trainable {trainable:,})")
    print(f"  {'torch step':28s} {torch_ms:10.2f} ms")
    if args.json:
        try:
            with open(args.json, encoding="utf-8") as f:
                run = json.load(f)
            pfx_ms = run["phases"]["step"]["wall_ms"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"{args.json}: not a bench_model --json run ({e})")
        print(f"  {'prefixcl step':28s} {pfx_ms:10.2f} ms ({run.get('device', '?')})")
        print(f"  {'prefixcl / torch':28s} {pfx_ms / torch_ms:10.2f}")


if __name__ == "__main__":
    main()
