"""Streaming screen vs the decoder-only forward vs naive ``output_attentions`` vs TransformerLens 4 (issues 13, 25).

All routes run on one randomly initialised GPT-NeoX of pythia-160m's shape, built from
its config (12 layers x 12 heads, d_model 768, d_ff 3072, vocab 50304, rotary_pct
0.25, 2048 positions; no download), SDPA attention, on the same synthetic induction
probe (``emergence.probes.synthetic_induction``: ``[0] a1..a31 a1..a31``, T = 63):

- decoder: the decoder-only forward the screen wraps (``model.gpt_neox(ids)``, SDPA): the
  yardstick (issue 25); floor: the decoder plus the logits at the induction targets (the
  least the project recipe computes), beside its FLOP count (benchmarks/bench_screen.py);
- streaming: the project's ``screen()`` with the default all-class config plus the
  participation ratio (``ScreenConfig(participation_ratio=True)``, recipe ``project``);
- bare: ``model(input_ids)`` (full logits at every position, outputs dropped): the old yardstick;
- naive: ``model(ids, output_attentions=True)`` (eager) holds every layer's attention of the
  batch; their batch sums are accumulated, the loss is taken from the full logits, and
  the six selectivities are computed once from the mean attention (the project's own
  arithmetic, so the same numbers; no PR: this route has no head outputs);
- tl: TransformerLens 4 ``TransformerBridge`` wrapping the same HF model (built offline
  with ``build_bridge_from_module``), ``bridge.run_with_cache(ids)`` per batch (the
  default full cache), the loss from its logits, and ``detect_head`` for TL's three
  head types (previous/duplicate/induction) on the batch-mean pattern cache.

Peak memory: each route runs once alone in a fresh subprocess; its peak is the rise of
the process's resident-set high-water mark (``ru_maxrss``) over its resident size just
before the route (model, probe and, for tl, the bridge already built) -- RSS, not
tracemalloc, because torch allocates outside Python's allocator.

Throughput: all routes run in one further subprocess, interleaved batch by batch in
rotating order, ``--repeats`` passes over the probe (tl on a deep copy of the model,
since the bridge rewires its model in place), so that load from other jobs on a shared
machine falls on every route alike; tokens/s = tokens screened / summed route time, and
the ratios are of the summed times (the per-round spread is printed too, and the
machine's load average before and after). The streaming route is one ``screen()`` call
per batch here, so its per-call setup is charged per batch.

    python benchmarks/bench_screen_tl.py [--n-sequences 40] [--batch-size 20] [--repeats 3]
    python benchmarks/bench_screen_tl.py --profile      # torch.profiler: streaming screen vs bare forward

Goals: streaming >= 2x TransformerLens's throughput at <= 1/4 of its peak memory (issue 13),
and streaming within 1.1x of the decoder-only forward it wraps (issue 25).
Needs the ``bench`` extra: ``pip install -e '.[bench]'`` (transformer-lens>=4.3).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from emergence.common.contract import INDUCTION_LOSS_METRIC, selectivity_column  # noqa: E402  (torch-free)
from bench_screen import flop_floor, load_average, logit_rows  # noqa: E402  (the yardstick's routes)

#: EleutherAI/pythia-160m config.json values (hidden size, layers, heads, d_ff, vocab, rotary).
PYTHIA_160M = dict(vocab_size=50304, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                   intermediate_size=3072, hidden_act="gelu", rotary_pct=0.25, rotary_emb_base=10000,
                   max_position_embeddings=2048, layer_norm_eps=1e-5, use_parallel_residual=True,
                   tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
ROUTES = ("decoder", "floor", "streaming", "bare", "naive", "tl")
SEGMENT = 31


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def build(args):
    import torch
    from transformers import AutoModelForCausalLM, GPTNeoXConfig

    from emergence.probes import synthetic_induction

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_config(GPTNeoXConfig(**PYTHIA_160M), attn_implementation="sdpa").eval()
    probe = synthetic_induction(range(1, PYTHIA_160M["vocab_size"]), args.n_sequences, SEGMENT, first_token=0,
                                seed=0, batch_size=args.batch_size)
    return model, probe


def induction_loss_full_logits(logits, ids):
    """Mean cross-entropy at the induction targets (q = n+1 .. 2n-1), from full logits."""
    import torch

    n = (ids.shape[1] - 1) // 2
    lg = logits[:, n + 1:ids.shape[1] - 1].float()
    y = ids[:, n + 2:]
    return float(torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), y.reshape(-1), reduction="sum")), y.numel()


def selectivities_from_mean(A, ids0):
    """The project's six selectivities from the mean attention A [L, H, T, T] (shared targets)."""
    from emergence.screens.selectivity import SelectivityReducer

    class _Adapter:
        n_layers, n_heads = A.shape[0], A.shape[1]

    r = SelectivityReducer()
    r.begin(_Adapter(), None)
    r.start_batch(ids0[None])
    for layer in range(A.shape[0]):
        r.attention(layer, A[layer][None])
    return r.finish().heads


def decoder_route(model, probe, floor: bool = False):
    """The decoder-only forward (``floor``: plus the logits at the induction targets)."""
    import torch

    from emergence.screens.base import base_model

    decoder, head = base_model(model), model.get_output_embeddings()
    with torch.inference_mode():
        for ids in probe.batches():
            h = decoder(input_ids=ids, use_cache=False).last_hidden_state
            if floor:
                head(h[logit_rows("project", ids)]).float()


def naive_route(model, probe):

    saved = model.config._attn_implementation
    model.set_attn_implementation("eager")  # output_attentions needs eager attention
    try:
        return _naive(model, probe)
    finally:
        model.set_attn_implementation(saved)


def _naive(model, probe):
    import torch

    sums, loss, count = None, 0.0, 0
    with torch.no_grad():
        for ids in probe.batches():
            out = model(ids, output_attentions=True)
            atts = torch.stack(out.attentions)  # [L, B, H, T, T]: every layer of the batch at once
            sums = atts.sum(1) if sums is None else sums + atts.sum(1)
            s, c = induction_loss_full_logits(out.logits, ids)
            loss, count = loss + s, count + c
            del out, atts
    heads = selectivities_from_mean(sums / probe.n_sequences, probe.input_ids[0])
    return {"induction_loss": loss / count, "max_induction_sel": float(heads[selectivity_column("induction")].max())}


def make_bridge(model):
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    bridge = build_bridge_from_module(model, type(model).__name__, hf_config=model.config)
    # No tokenizer offline: detect_head only tokenizes ``seq`` to get its length and its
    # token-dependent patterns, so hand it the token ids themselves.
    bridge.to_tokens = lambda seq, *a, **k: seq
    return bridge


def tl_route(bridge, probe):
    import torch
    from transformer_lens.ActivationCache import ActivationCache
    from transformer_lens.head_detector import HEAD_NAMES, detect_head

    L = bridge.cfg.n_layers
    sums, loss, count = None, 0.0, 0
    with torch.no_grad():
        for ids in probe.batches():
            logits, cache = bridge.run_with_cache(ids)
            pat = torch.stack([cache["pattern", layer, "attn"].sum(0) for layer in range(L)])
            sums = pat if sums is None else sums + pat
            s, c = induction_loss_full_logits(logits, ids)
            loss, count = loss + s, count + c
            del logits, cache
        mean = sums / probe.n_sequences
        mean_cache = ActivationCache({f"blocks.{layer}.attn.hook_pattern": mean[layer] for layer in range(L)}, bridge)
        scores = {name: detect_head(bridge, probe.input_ids[:1], name, cache=mean_cache) for name in HEAD_NAMES}
    return {"induction_loss": loss / count, "max_induction_score": float(scores["induction_head"].max())}


def route(name: str, args) -> dict:
    import torch
    from omegaconf import OmegaConf

    from emergence.adapters import adapter_for
    from emergence.config import ScreenConfig
    from emergence.screens import screen

    model, probe = build(args)
    with torch.no_grad():  # warm-up, so lazy allocations are not charged to a route
        model(probe.input_ids[:2])
    setup_s = 0.0
    if name == "tl":
        tic = time.perf_counter()
        bridge = make_bridge(model)
        with torch.no_grad():
            bridge.run_with_cache(probe.input_ids[:2])
        setup_s = time.perf_counter() - tic
    before = rss_bytes()
    start = time.perf_counter()
    info = {}
    if name == "streaming":
        cfg = OmegaConf.structured(ScreenConfig(participation_ratio=True))
        res = screen(model, adapter_for(model), probe, cfg, progress=False)
        info = {"induction_loss": res.metrics[INDUCTION_LOSS_METRIC],
                "max_induction_sel": float(res.heads[selectivity_column("induction")].max())}
    elif name == "naive":
        info = naive_route(model, probe)
    elif name == "tl":
        info = tl_route(bridge, probe)
    elif name in ("decoder", "floor"):
        decoder_route(model, probe, floor=name == "floor")
    else:
        with torch.no_grad():
            for ids in probe.batches():
                model(ids)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"route": name, "wall_s": wall, "peak_rise_mb": max(peak - before, 0) / 2**20, "setup_s": setup_s,
            **info}


def interleaved(args) -> dict:
    """All four routes in one process, timed chunk by chunk (one batch of sequences per chunk) in
    rotating order, so that load from other jobs on a shared machine falls on every route alike."""
    import copy

    import torch
    from omegaconf import OmegaConf

    from emergence.adapters import adapter_for
    from emergence.config import ScreenConfig
    from emergence.probes import Probe
    from emergence.screens import screen

    model, probe = build(args)
    bridge = make_bridge(copy.deepcopy(model))  # the bridge rewires its model in place: give it a copy
    adapter = adapter_for(model)
    cfg = OmegaConf.structured(ScreenConfig(participation_ratio=True))

    def bare(p):
        with torch.no_grad():
            for ids in p.batches():
                model(ids)

    fns = {"bare": bare, "streaming": lambda p: screen(model, adapter, p, cfg, progress=False),
           "naive": lambda p: naive_route(model, p), "tl": lambda p: tl_route(bridge, p),
           "decoder": lambda p: decoder_route(model, p), "floor": lambda p: decoder_route(model, p, floor=True)}
    routes = [r for r in args.routes.split(",") if r]
    chunks = [Probe(probe.input_ids[i:i + args.batch_size], probe.kind, probe.first_token, args.batch_size,
                    probe.description) for i in range(0, probe.n_sequences, args.batch_size)]
    for r in routes:  # warm-up
        fns[r](chunks[0].head(2))
    total = {r: 0.0 for r in routes}
    rounds = []
    k = 0
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
    per_seq = float(logit_rows("project", probe.input_ids).sum()) / probe.n_sequences
    return {"total_s": total, "rounds": rounds, "tokens": args.repeats * probe.input_ids.numel(),
            "flops": flop_floor(model.config, "project", probe.seq_len, per_seq)}


def profile(args) -> None:
    """torch.profiler over the streaming screen and over a bare forward of the same probe; prints
    the screen's top operators and where its self CPU time differs from the bare forward's."""
    import torch
    from omegaconf import OmegaConf
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from emergence.adapters import adapter_for
    from emergence.config import ScreenConfig
    from emergence.screens import screen

    model, probe = build(args)
    with torch.no_grad():
        model(probe.input_ids[:2])
    cfg = OmegaConf.structured(ScreenConfig(participation_ratio=True))
    adapter = adapter_for(model)

    def run_bare():
        with torch.no_grad():
            for ids in probe.batches():
                model(ids)

    tables = {}
    for name, fn in (("bare", run_bare), ("streaming", lambda: screen(model, adapter, probe, cfg, progress=False))):
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
        tables[name] = prof.key_averages()
    print(f"torch.profiler, {args.n_sequences} sequences in batches of {args.batch_size}, {args.threads} threads")
    print(tables["streaming"].table(sort_by="self_cpu_time_total", row_limit=args.profile_rows))
    self_ms = {n: {e.key: (e.self_cpu_time_total / 1e3, e.count) for e in t} for n, t in tables.items()}
    total = {n: sum(v[0] for v in d.values()) for n, d in self_ms.items()}
    print(f"self CPU total: streaming {total['streaming']:.0f} ms, bare {total['bare']:.0f} ms")
    diff = sorted(((self_ms["streaming"][k][0] - self_ms["bare"].get(k, (0.0, 0))[0], k) for k in self_ms["streaming"]),
                  reverse=True)
    print("operators by self CPU time streaming minus bare (ms; calls streaming/bare):")
    for d, k in diff[:args.profile_rows]:
        print(f"  {k:<40}{d:>10.1f}   {self_ms['streaming'][k][1]}/{self_ms['bare'].get(k, (0, 0))[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-sequences", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--routes", default=",".join(ROUTES))
    parser.add_argument("--route", choices=ROUTES, help=argparse.SUPPRESS)
    parser.add_argument("--interleave", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help="profile the streaming screen and exit")
    parser.add_argument("--profile-rows", type=int, default=25)
    args = parser.parse_args()
    if args.route:
        print(json.dumps(route(args.route, args)))
        return
    if args.interleave:
        print(json.dumps(interleaved(args)))
        return
    if args.profile:
        profile(args)
        return
    routes = [r for r in args.routes.split(",") if r]
    T = 2 * SEGMENT + 1
    print(f"GPT-NeoX pythia-160m shape (12 x 12 heads, d_model 768, vocab 50304), random init, SDPA attention; "
          f"{args.n_sequences} sequences of length {T} ({args.n_sequences * T} tokens) in batches of "
          f"{args.batch_size}; {args.threads} threads; {load_average()}", flush=True)
    common = [f"--n-sequences={args.n_sequences}", f"--batch-size={args.batch_size}", f"--threads={args.threads}"]
    t0 = time.perf_counter()
    # 1. Peak memory: each route alone in a fresh process (RSS high-water rise).
    mem = {}
    for name in routes:
        out = subprocess.run([sys.executable, __file__, "--route", name, *common], cwd=ROOT, capture_output=True,
                             text=True)
        if out.returncode != 0:
            sys.exit(f"route {name} failed:\n{out.stderr[-3000:]}")
        mem[name] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  memory run {name:<10} {mem[name]['wall_s']:8.2f} s {mem[name]['peak_rise_mb']:9.1f} MB", flush=True)
    # 2. Throughput: all routes in one process, interleaved batch by batch.
    out = subprocess.run([sys.executable, __file__, "--interleave", f"--routes={','.join(routes)}",
                          f"--repeats={args.repeats}", *common], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"interleaved timing failed:\n{out.stderr[-3000:]}")
    tim = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"total benchmark time {time.perf_counter() - t0:.0f} s; timing: {args.repeats} passes over the probe, "
          f"routes interleaved batch by batch in rotating order ({len(tim['rounds'])} rounds)")
    tot = tim["total_s"]
    print(f"{'route':<12}{'time s':>9}{'tokens/s':>10}{'peak rise MB':>14}   (time: interleaved run; memory: own process)")
    for n in routes:
        print(f"{n:<12}{tot[n]:>9.2f}{tim['tokens'] / tot[n]:>10.0f}{mem[n]['peak_rise_mb']:>14.1f}")
    if "streaming" not in tot:
        return

    def spread(a, b):
        r = sorted(x[a] / x[b] for x in tim["rounds"])
        return f"per-round {r[0]:.2f}-{r[-1]:.2f}, median {statistics.median(r):.2f}"

    verdict = lambda ok: "PASS" if ok else "FAIL"  # noqa: E731
    ms = mem["streaming"]["peak_rise_mb"]
    if "decoder" in tot:
        ratio = tot["streaming"] / tot["decoder"]
        print(f"time streaming / decoder-only forward = {ratio:.2f}x ({spread('streaming', 'decoder')}) "
              f"(goal <= 1.1x) {verdict(ratio <= 1.1)}; peak memory streaming / decoder = "
              f"{ms / max(mem['decoder']['peak_rise_mb'], 1e-9):.2f}x")
    if "floor" in tot and "decoder" in tot:
        print(f"time floor (decoder + induction-target logits) / decoder = {tot['floor'] / tot['decoder']:.2f}x "
              f"measured, {tim['flops']['floor_ratio']:.2f}x by FLOPs; streaming / floor = "
              f"{tot['streaming'] / tot['floor']:.2f}x ({spread('streaming', 'floor')})")
    if "bare" in tot:
        print(f"time streaming / bare (model(ids), full logits: the old yardstick) = "
              f"{tot['streaming'] / tot['bare']:.2f}x ({spread('streaming', 'bare')})")
    if "naive" in tot:
        print(f"naive / streaming: time {tot['naive'] / tot['streaming']:.2f}x, "
              f"peak memory {mem['naive']['peak_rise_mb'] / max(ms, 1e-9):.1f}x")
    if "tl" in tot:
        thr = tot["tl"] / tot["streaming"]
        m = mem["tl"]["peak_rise_mb"] / max(ms, 1e-9)
        print(f"throughput streaming / tl = {thr:.2f}x ({spread('tl', 'streaming')}) (goal >= 2x) {verdict(thr >= 2)}")
        print(f"peak memory tl / streaming = {m:.1f}x (goal >= 4x, i.e. streaming <= 1/4 of tl) {verdict(m >= 4)}")
        print(f"(tl bridge build + warm-up, not timed: {mem['tl']['setup_s']:.1f} s)")
    print(load_average())


if __name__ == "__main__":
    main()
