"""Streaming screen vs the naive route vs a bare eager forward pass, on 2000 probe sequences.

Each route runs in its own subprocess on the same model (a GPT-NeoX built locally
from its config, random weights) and the same synthetic induction batch (METHODS
section 4, N = 2000, n = 31, batches of 100):

- streaming: ``emergence.screens.screen`` (hooks reduce each layer's attention as it
  is produced; logits only at the induction targets);
- naive: ``model(..., output_attentions=True)`` keeps every layer's attention of the
  batch, then per-head Python loops compute the six selectivities; loss from the
  full logits;
- bare: ``model(input_ids)`` with eager attention, outputs dropped.

Peak memory is the rise of the process's resident-set high-water mark over its
resident size just before the route (model and batch already built).

    python benchmarks/bench_screen.py [--layers 16] [--heads 8] [--d-model 256] [--vocab 8192]

The default shape is pythia-1b's head layout (16 layers x 8 heads) at a width a CPU
runs in minutes.

Goals (issue 2): peak memory at least 3x below the naive route; wall time within
1.2x of the bare forward pass.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def build(args):
    import torch
    from transformers import AutoModelForCausalLM, GPTNeoXConfig

    from emergence.probes import synthetic_induction

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    config = GPTNeoXConfig(vocab_size=args.vocab, hidden_size=args.d_model, num_hidden_layers=args.layers,
                           num_attention_heads=args.heads, intermediate_size=4 * args.d_model,
                           rotary_pct=1.0, bos_token_id=0, eos_token_id=0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    probe = synthetic_induction(range(1, args.vocab), args.n_sequences, 31, first_token=0, seed=0,
                                batch_size=args.batch_size)
    return model, probe


def naive_screen(model, probe):
    """The route a first script takes: all attentions of a batch, then loops per head."""
    import torch

    n = (probe.seq_len - 1) // 2
    T = probe.seq_len
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    sums = None
    loss_sum, count = 0.0, 0
    with torch.no_grad():
        for ids in probe.batches():
            out = model(ids, output_attentions=True)
            atts = torch.stack(out.attentions)  # [L, B, H, T, T]: every layer held at once
            sums = atts.sum(1) if sums is None else sums + atts.sum(1)
            logits = out.logits[:, n + 1:T - 1]
            targets = ids[:, n + 2:T]
            loss_sum += float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                                targets.reshape(-1), reduction="sum"))
            count += targets.numel()
            del out, atts, logits
    A = sums / probe.n_sequences
    selectivity = {}
    for layer in range(L):
        for h in range(H):
            a = A[layer, h]
            num = den = 0.0
            for q in range(n + 1, T):
                i = q - n
                others = [k for k in range(1, q + 1) if k != i + 1]
                num += float(a[q, i + 1])
                den += float(a[q, others].mean())
            selectivity[(layer, h, "induction")] = num / den
            for name, targets in (("bos", lambda q: [0]), ("self", lambda q: [q]),
                                  ("previous_token", lambda q: [q - 1])):
                num = den = 0.0
                for q in range(2, T):
                    t = targets(q)
                    excluded = set(t) | ({0} if name != "bos" else set())
                    others = [k for k in range(q + 1) if k not in excluded]
                    num += float(a[q, t].mean())
                    den += float(a[q, others].mean())
                selectivity[(layer, h, name)] = num / den
    return selectivity, loss_sum / count


def route(name: str, args) -> dict:
    import torch
    from omegaconf import OmegaConf

    from emergence.adapters import adapter_for
    from emergence.config import ScreenConfig
    from emergence.screens import screen

    model, probe = build(args)
    with torch.no_grad():  # warm-up, so lazy allocations are not charged to a route
        model(probe.input_ids[:2])
    before = rss_bytes()
    start = time.perf_counter()
    if name == "streaming":
        screen(model, adapter_for(model), probe, OmegaConf.structured(ScreenConfig()), progress=False)
    elif name == "naive":
        naive_screen(model, probe)
    else:
        with torch.no_grad():
            for ids in probe.batches():
                model(ids)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"route": name, "wall_s": wall, "peak_rise_mb": max(peak - before, 0) / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--n-sequences", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--route", choices=["streaming", "naive", "bare"])
    args = parser.parse_args()
    if args.route:
        print(json.dumps(route(args.route, args)))
        return
    results = {}
    for name in ("bare", "streaming", "naive"):
        cmd = [sys.executable, __file__, "--route", name] + [
            f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k != "route" and v is not None]
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
        results[name] = json.loads(out.strip().splitlines()[-1])
    print(f"GPT-NeoX {args.layers} layers x {args.heads} heads, d_model {args.d_model}, vocab {args.vocab}; "
          f"{args.n_sequences} sequences of length 63 in batches of {args.batch_size}; {args.threads} threads")
    print(f"{'route':<12}{'wall s':>10}{'peak rise MB':>15}")
    for name, r in results.items():
        print(f"{name:<12}{r['wall_s']:>10.2f}{r['peak_rise_mb']:>15.1f}")
    s, n, b = results["streaming"], results["naive"], results["bare"]
    mem_ratio = n["peak_rise_mb"] / max(s["peak_rise_mb"], 1e-9)
    time_ratio = s["wall_s"] / b["wall_s"]
    print(f"memory: naive / streaming = {mem_ratio:.1f}x (goal >= 3x) "
          f"{'PASS' if mem_ratio >= 3 else 'FAIL'}")
    print(f"time: streaming / bare = {time_ratio:.2f}x (goal <= 1.2x) {'PASS' if time_ratio <= 1.2 else 'FAIL'}")


if __name__ == "__main__":
    main()
