#!/usr/bin/env python3
"""PyTorch peer of bench/bench_train: one full-training step of GPT-2 small
(random init from GPT2Config(), or with --model DIR the model and weights of
a Hugging Face folder; float32, no dropout) on the CPU at B=8, N=128:
forward with labels, backward, torch.nn.utils.clip_grad_norm_(1.0),
torch.optim.AdamW (lr 1e-4, weight decay 0.01; fused when this torch has a
fused CPU AdamW, the fastest exactly equivalent form, else foreach), and
zero_grad(set_to_none). The batch is random ids, or with --data the first B
rows of T tokens of an llm.c-layout token shard (bench_train --data reads the
same). Median ms after warm-up steps, and beside it bench_train's figure from
its --json run with the ratio; --out writes each step's ms and the first
step's loss as JSON (bench/peer_train_llmc.py reads it).

    python3 bench/peer_train_torch.py [--model DIR] [--data SHARD] [--batch B] [--tokens T]
                                      [--json bench_train.json] [--out PATH] [--threads N]

Needs only the standard library to show --help; torch and transformers are
imported lazily.
"""
import argparse
import array
import json
import statistics
import struct
import sys
import time

SHARD_HEADER_INTS = 256
SHARD_MAGIC = {20240520: (1, "H"), 20240801: (7, "I")}  # magic: (version, item)


def read_shard_rows(path, batch, tokens):
    """The first batch rows of tokens ids of an llm.c token shard (its header
    checked), as a list of lists."""
    with open(path, "rb") as f:
        header = struct.unpack("<%di" % SHARD_HEADER_INTS, f.read(4 * SHARD_HEADER_INTS))
        if header[0] not in SHARD_MAGIC or header[1] != SHARD_MAGIC[header[0]][0]:
            sys.exit("%s: not an llm.c token shard (magic %d, version %d)" % (path, header[0], header[1]))
        if header[2] < batch * tokens:
            sys.exit("%s: %d tokens, the batch needs %d" % (path, header[2], batch * tokens))
        ids = array.array(SHARD_MAGIC[header[0]][1])
        ids.fromfile(f, batch * tokens)
    if sys.byteorder != "little":
        ids.byteswap()
    return [list(ids[b * tokens:(b + 1) * tokens]) for b in range(batch)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="bench_train --json output to compare with")
    ap.add_argument("--model", help="a Hugging Face GPT-2 folder (default: GPT2Config() random)")
    ap.add_argument("--data", help="an llm.c token shard: the batch is its first B rows of T")
    ap.add_argument("--out", help="write each step's ms and the first loss here as JSON")
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
    if args.model:
        model = GPT2LMHeadModel.from_pretrained(args.model, resid_pdrop=0.0, embd_pdrop=0.0,
                                                attn_pdrop=0.0).float()
        cfg = model.config
    else:
        cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = GPT2LMHeadModel(cfg)
    model.train()
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
        kind = "fused"
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, foreach=True)
        kind = "foreach"
    if args.data:
        ids = torch.tensor(read_shard_rows(args.data, args.batch, args.tokens), dtype=torch.long)
    else:
        ids = torch.randint(0, cfg.vocab_size, (args.batch, args.tokens))
    times = []
    first_loss = None
    for it in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        ms = (time.perf_counter() - t0) * 1e3
        if first_loss is None:
            first_loss = loss.item()
        if it >= args.warmup:
            times.append(ms)
        print("step %d: loss %.4f, %.0f ms" % (it - args.warmup, loss.item(), ms), file=sys.stderr)
    med = statistics.median(times)
    print("torch %s, %d threads, AdamW %s" % (torch.__version__, torch.get_num_threads(), kind))
    print("test: %s full-training step, B=%d N=%d, %d parameters" %
          (args.model or "GPT-2 small", args.batch, args.tokens, sum(p.numel() for p in model.parameters())))
    print("  torch step            %10.2f ms  (%.0f tokens/s)" % (med, args.batch * args.tokens / (med / 1e3)))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"tool": "peer_train_torch", "torch": torch.__version__,
                       "threads": torch.get_num_threads(), "adamw": kind, "batch": args.batch,
                       "tokens": args.tokens, "first_loss": first_loss, "step_ms": med,
                       "step_ms_each": times}, f)
            f.write("\n")
    if args.json:
        with open(args.json) as f:
            ours = json.load(f)
        print("  prefixcl step         %10.2f ms  (%s)" % (ours["step_ms"], ours["device"]))
        print("  speed, prefixcl / torch: %.2fx" % (med / ours["step_ms"]))


if __name__ == "__main__":
    main()
