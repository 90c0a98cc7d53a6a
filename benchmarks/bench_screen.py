"""The screen against the forward it wraps (the yardstick of issue 25), both recipes, one process.

The screen runs the decoder only (``model.gpt_neox`` / ``model.model``: no LM head at every
position) plus the logits its continuous metric needs (the project recipe: the induction
targets, q = n+1 .. 2n-1; the study's recipe: the last position). So its yardstick is

- ``decoder``: the decoder-only forward, SDPA attention (``base_model(model)(ids)``), and
- ``floor``: the decoder plus those logits (the least any screen of the recipe computes),

with the FLOP floor printed beside it (decoder FLOPs 2 x parameters per token plus the
attention products, logits 2 d V a logit row). ``bare`` (``model(ids)``: SDPA, 50k-wide
logits at every position) is the old yardstick, printed for comparison. Routes:

- ``screen``: ``emergence.screens.screen`` (project: every class and the PR, T = 63
  synthetic induction probe; xu2026: the study's recipe without ablation, T = 256 probe);
- ``decoder``, ``floor``, ``bare`` as above.

Time: all routes of a recipe in this one process, interleaved batch by batch in rotating
order, ``--repeats`` passes over the probe, so load from other jobs on a shared machine
falls on every route alike; ratios are of summed times, with the per-round spread. The
machine's load average is printed before and after. Memory (``--memory``): each route
alone in a fresh process, the rise of its resident-set high-water mark, plus the naive
``output_attentions=True`` route (every layer's map held at once).

    python benchmarks/bench_screen.py [--recipes project,xu2026] [--n-sequences 32] [--repeats 2]

The default shape is pythia-160m's (12 x 12 heads, d_model 768, d_ff 3072, vocab 50304),
random weights, built from its config (no download).

``--recipes ablation`` times a whole revision of the study's recipe with its ablation (the
group ``ABLATION_GROUP``, 10 matched controls, the whole-layer bound) as the job now runs it
(the screen's pass as the clean pass, prefix reuse) against the route before (the screen, a
clean pass and 12 full ablated passes), interleaved the same way.

Goal (issue 25): screen <= 1.1x the decoder-only forward it wraps.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: EleutherAI/pythia-160m config.json values (hidden size, layers, heads, d_ff, vocab, rotary).
PYTHIA_160M = dict(vocab_size=50304, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                   intermediate_size=3072, hidden_act="gelu", rotary_pct=0.25, rotary_emb_base=10000,
                   max_position_embeddings=2048, layer_norm_eps=1e-5, use_parallel_residual=True,
                   tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
ROUTES = ("decoder", "floor", "screen", "bare")
#: ``--recipes ablation``: a whole revision of the study's recipe now (screen + ablation sharing work)
#: against before (screen, a clean pass and 12 full ablated passes), and the decoder for scale.
ABLATION_ROUTES = ("decoder", "revision", "revision_before")
GOAL = 1.1


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def build_model(threads: int, config_values=None):
    import torch
    from transformers import AutoModelForCausalLM, GPTNeoXConfig

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    config = GPTNeoXConfig(**(config_values or PYTHIA_160M))
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()


def build_recipe(recipe: str, model, n_sequences: int, batch_size: int):
    """(probe, screen config) of ``recipe``."""
    from omegaconf import OmegaConf

    from emergence.config import ScreenConfig
    from emergence.probes import synthetic_induction, xu2026
    from emergence.catalog import compose

    vocab = model.config.vocab_size
    if recipe == "ablation":
        probe, cfg = build_recipe("xu2026", model, n_sequences, batch_size)
        return probe, cfg
    if recipe == "project":
        probe = synthetic_induction(range(1, vocab), n_sequences, 31, first_token=0, seed=0, batch_size=batch_size)
        return probe, OmegaConf.structured(ScreenConfig(participation_ratio=True))
    cfg = compose(["model=toy_neox", "corpus=xu2026", "screen=xu2026", "screen.ablation=null"]).screen
    return xu2026(n_sequences, 256, 100, min(10000, vocab), 42, batch_size), cfg


def logit_rows(recipe: str, ids):
    """Boolean [B, T]: the positions whose logits the recipe's continuous metric reads."""
    import torch

    if recipe == "project":
        from emergence.screens.continuous import induction_targets

        return induction_targets(ids)
    rows = torch.zeros(ids.shape, dtype=torch.bool)
    rows[:, -1] = True
    return rows


def route_functions(recipe: str, model, probe, cfg):
    """name -> function(probe chunk) for the recipe's routes."""
    import torch

    from emergence.adapters import adapter_for
    from emergence.screens import screen
    from emergence.screens.base import base_model

    decoder, adapter = base_model(model), adapter_for(model)
    head = model.get_output_embeddings()

    def run_decoder(p):
        with torch.inference_mode():
            for ids in p.batches():
                decoder(input_ids=ids, use_cache=False)

    def run_floor(p):
        with torch.inference_mode():
            for ids in p.batches():
                h = decoder(input_ids=ids, use_cache=False).last_hidden_state
                head(h[logit_rows(recipe, ids)]).float()

    def run_bare(p):
        with torch.inference_mode():
            for ids in p.batches():
                model(ids)

    return {"decoder": run_decoder, "floor": run_floor, "bare": run_bare,
            "screen": lambda p: screen(model, adapter, p, cfg, progress=False),
            "revision": lambda p: screen(model, adapter, p, ablation_cfg(cfg), progress=False),
            "revision_before": lambda p: revision_before(model, adapter, p, cfg)}


#: The ablation group of ``--recipes ablation``: Pythia-1B's reported induction heads, at
#: pythia-160m's depth (layers 4 and 7 of 12), so the ablated suffix is 8 of 12 layers.
ABLATION_GROUP = ["4.4", "7.1", "7.0"]


def ablation_cfg(cfg):
    """The study's screen with its ablation (zero; the group, 10 matched controls, the whole-layer bound)."""
    from omegaconf import OmegaConf

    from emergence.catalog import compose

    full = compose(["model=toy_neox", "corpus=xu2026", "screen=xu2026"]).screen
    full.ablation.group, full.ablation.heads = "list", list(ABLATION_GROUP)
    return OmegaConf.merge(cfg, {"ablation": full.ablation})


def revision_before(model, adapter, probe, cfg):
    """What a revision cost before issue 25: the screen, then a clean pass and one full forward per
    ablated head set (the group, the controls, the bound), none sharing work."""
    from emergence.screens import screen
    from emergence.screens.head_ablation import ablated
    from emergence.screens.base import run_pass
    from emergence.screens.xu2026 import LastPositionLossReducer
    from emergence.screens.xu2026_ablation import matched_controls, upper_bound

    full = ablation_cfg(cfg)
    screen(model, adapter, probe, cfg, progress=False)
    group = sorted(tuple(int(x) for x in h.split(".")) for h in full.ablation.heads)
    sets = [[], group, *matched_controls(group, adapter.n_heads, full.ablation.controls), upper_bound(group, adapter.n_heads)]
    for heads in sets:
        with ablated(adapter, heads, "zero"):
            run_pass(model, adapter, probe, [LastPositionLossReducer()], progress=False)


def flop_floor(config, recipe: str, seq_len: int, logits_per_sequence: float) -> dict:
    """FLOPs a sequence of the decoder (2 x weights a token, plus the attention products
    QK^T and AV over the causal half) and of the recipe's logits (2 d V a row)."""
    d, L, f = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    T = seq_len
    per_token = L * (2 * (4 * d * d + 2 * d * f) + 2 * 2 * d * (T + 1) / 2)
    decoder = per_token * T
    logits = 2 * d * config.vocab_size * logits_per_sequence
    return {"decoder": decoder, "logits": logits, "floor_ratio": (decoder + logits) / decoder}


def interleaved(recipe: str, args) -> dict:
    from emergence.probes import Probe

    model = build_model(args.threads)
    probe, cfg = build_recipe(recipe, model, args.n_sequences, args.batch_size)
    fns = route_functions("xu2026" if recipe == "ablation" else recipe, model, probe, cfg)
    routes = ABLATION_ROUTES if recipe == "ablation" else [r for r in ROUTES if r in args.routes.split(",")]
    chunks = [Probe(probe.input_ids[i:i + args.batch_size], probe.kind, probe.first_token, args.batch_size,
                    probe.description, None if probe.layout is None else probe.layout.rows(i, i + args.batch_size))
              for i in range(0, probe.n_sequences, args.batch_size)]
    for r in routes:  # warm-up
        fns[r](chunks[0].head(2))
    total = {r: 0.0 for r in routes}
    rounds, k = [], 0
    for _ in range(args.repeats):
        for chunk in chunks:
            order = routes[k % len(routes):] + routes[:k % len(routes)]
            k += 1
            this = {}
            for r in order:
                tic = time.perf_counter()
                fns[r](chunk)
                this[r] = time.perf_counter() - tic
                total[r] += this[r]
            rounds.append(this)
    per_seq = float(logit_rows("xu2026" if recipe == "ablation" else recipe, probe.input_ids).sum()) / probe.n_sequences
    return {"total_s": total, "rounds": rounds, "tokens": args.repeats * probe.input_ids.numel(),
            "seq_len": probe.seq_len, "flops": flop_floor(model.config, recipe, probe.seq_len, per_seq)}


def naive_route(model, probe):
    """Every layer's attention of a batch held at once (``output_attentions=True``, eager)."""
    import torch

    model.set_attn_implementation("eager")
    sums = None
    with torch.no_grad():
        for ids in probe.batches():
            atts = torch.stack(model(ids, output_attentions=True).attentions)  # [L, B, H, T, T]
            sums = atts.sum(1) if sums is None else sums + atts.sum(1)
    return sums


def memory(recipe: str, name: str, args) -> dict:
    model = build_model(args.threads)
    probe, cfg = build_recipe(recipe, model, args.n_sequences, args.batch_size)
    fns = route_functions(recipe, model, probe, cfg)
    fns["naive"] = lambda p: naive_route(model, p)
    fns["decoder"](probe.head(2))
    before = rss_bytes()
    tic = time.perf_counter()
    fns[name](probe)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"wall_s": time.perf_counter() - tic, "peak_rise_mb": max(peak - before, 0) / 2**20}


def report(recipe: str, tim: dict, mem: dict) -> None:
    tot, fl = tim["total_s"], tim["flops"]
    print(f"\n[{recipe}] T = {tim['seq_len']}, {len(tim['rounds'])} rounds; FLOP floor (decoder + the recipe's "
          f"logits) / decoder = {fl['floor_ratio']:.3f}x")
    print(f"{'route':<10}{'time s':>9}{'tokens/s':>10}{'/ decoder':>11}" + (f"{'peak rise MB':>14}" if mem else ""))
    for name, t in tot.items():
        extra = f"{mem[name]['peak_rise_mb']:>14.1f}" if name in mem else ""
        print(f"{name:<10}{t:>9.2f}{tim['tokens'] / t:>10.0f}{t / tot['decoder']:>10.2f}x{extra}")

    def spread(a, b):
        r = sorted(x[a] / x[b] for x in tim["rounds"])
        return f"per-round {r[0]:.2f}-{r[-1]:.2f}, median {statistics.median(r):.2f}"

    if "screen" in tot and "decoder" in tot:
        ratio = tot["screen"] / tot["decoder"]
        print(f"time screen / decoder = {ratio:.2f}x ({spread('screen', 'decoder')}) (goal <= {GOAL}x) "
              f"{'PASS' if ratio <= GOAL else 'FAIL'}")
    if "floor" in tot and "decoder" in tot:
        print(f"time floor / decoder = {tot['floor'] / tot['decoder']:.2f}x measured, {fl['floor_ratio']:.2f}x by FLOPs")
    if "screen" in tot and "floor" in tot:
        print(f"time screen / floor = {tot['screen'] / tot['floor']:.2f}x ({spread('screen', 'floor')}): "
              "what the reducers and the map rows cost over the least the recipe computes")
    if "screen" in tot and "bare" in tot:
        print(f"time screen / bare (model(ids), full logits: the old yardstick) = {tot['screen'] / tot['bare']:.2f}x")
    if "revision" in tot and "revision_before" in tot:
        ratio = tot["revision_before"] / tot["revision"]
        print(f"a revision of the study's recipe with ablation: before / now = {ratio:.2f}x "
              f"({spread('revision_before', 'revision')}); now {tot['revision'] / tot['decoder']:.1f} decoder "
              f"forwards, before {tot['revision_before'] / tot['decoder']:.1f}")
    if "naive" in mem and "screen" in mem:
        print(f"peak memory naive output_attentions / screen = "
              f"{mem['naive']['peak_rise_mb'] / max(mem['screen']['peak_rise_mb'], 1e-9):.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", default="project,xu2026")
    parser.add_argument("--routes", default=",".join(ROUTES))
    parser.add_argument("--n-sequences", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--memory", action="store_true", help="also each route's peak memory in its own process")
    parser.add_argument("--interleave", help=argparse.SUPPRESS)
    parser.add_argument("--memory-route", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.interleave:
        print(json.dumps(interleaved(args.interleave, args)))
        return
    if args.memory_route:
        print(json.dumps(memory(*args.memory_route, args)))
        return
    common = [f"--n-sequences={args.n_sequences}", f"--batch-size={args.batch_size}", f"--threads={args.threads}",
              f"--repeats={args.repeats}", f"--routes={args.routes}"]
    print(f"GPT-NeoX pythia-160m shape (12 x 12 heads, d_model 768, vocab 50304), random init; {args.n_sequences} "
          f"sequences a recipe in batches of {args.batch_size}; {args.threads} threads; {load_average()}", flush=True)
    t0 = time.perf_counter()
    for recipe in args.recipes.split(","):
        mem = {}
        if args.memory:
            for name in [r for r in ROUTES if r in args.routes.split(",")] + ["naive"]:
                out = subprocess.run([sys.executable, __file__, "--memory-route", recipe, name, *common], cwd=ROOT,
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(f"memory run {recipe} {name} failed:\n{out.stderr[-3000:]}")
                mem[name] = json.loads(out.stdout.strip().splitlines()[-1])
        out = subprocess.run([sys.executable, __file__, f"--interleave={recipe}", *common], cwd=ROOT,
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"interleaved timing of {recipe} failed:\n{out.stderr[-3000:]}")
        report(recipe, json.loads(out.stdout.strip().splitlines()[-1]), mem)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; {load_average()}")


if __name__ == "__main__":
    main()
