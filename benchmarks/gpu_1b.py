"""The study's own recipe at 1B size on a GPU: time per revision split into fetch / load / screen / ablation.

**Not run on a GPU yet** (written 2026-12-04 without one; checked end to end on the CPU with
``--dry``). On randomly initialised models of the study's three shapes, built from their
published configs written out below (no download):

- ``pythia_1b``: EleutherAI/pythia-1b (GPT-NeoX, 16 x 8 heads, d_model 2048), float32,
  ``matmul_precision=auto`` (TF32 on CUDA);
- ``olmo_1b_0724``: allenai/OLMo-1B-0724-hf (16 x 16, d_model 2048, clip_qkv 8), bfloat16;
- ``olmoe_1b_7b``: allenai/OLMoE-1B-7B-0924 (16 x 16, 64 experts top-8), bfloat16;

each model is saved once (``save_pretrained``, safetensors) as a "remote" revision folder,
and ``--revisions`` revisions go through the job's own machinery: the download pipeline
(``emergence.prefetch.Pipeline``: fetch = copy the folder into a cache folder, throttled to
``--fetch-gbps`` when given; the next revision fetched *and loaded onto the GPU* while this
one is screened; evict = delete the copy), ``emergence.loading.load`` (SDPA, weights read
straight onto the device, the family's dtype and matmul precision), the batch planner, and
``emergence.screens.screen`` with the study's recipe: ``corpus=xu2026 screen=xu2026`` (2,000
sequences x T = 256, last-query selectivities, exp-entropy PR) with its ablation (zero; the
group, 10 per-layer matched controls and the whole-layer bound, last-position metrics over
all sequences). A random model has no >= 50x induction head, so the group is the study's
reported induction heads of that model (``GROUPS``): the ablation does the study's work.

Per revision it prints and writes: fetch (background copy), load (background), the time the
screen waited for both, the screen pass, the ablation, and the wall time per revision; per
model the yardstick (screen pass / the decoder-only forward on the same probe) and, for
Pythia, TF32 against float32 (largest relative selectivity difference, flags that differ at
the thresholds, time of each).

    python benchmarks/gpu_1b.py                  # needs CUDA; writes benchmarks/RESULTS.md
    python benchmarks/gpu_1b.py --quick          # 500 sequences (times also projected to 2,000)
    python benchmarks/gpu_1b.py --dry            # tiny configs on the CPU: checks the script (writes to /tmp)
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Published config.json values (model type, then the fields that set the shape and numerics).
CONFIGS = {
    "pythia_1b": ("gpt_neox", dict(
        vocab_size=50304, hidden_size=2048, num_hidden_layers=16, num_attention_heads=8, intermediate_size=8192,
        hidden_act="gelu", rotary_pct=0.25, rotary_emb_base=10000, max_position_embeddings=2048,
        layer_norm_eps=1e-5, use_parallel_residual=True, tie_word_embeddings=False, bos_token_id=0,
        eos_token_id=0)),
    "olmo_1b_0724": ("olmo", dict(
        vocab_size=50304, hidden_size=2048, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16,
        intermediate_size=8192, hidden_act="silu", max_position_embeddings=4096, rope_theta=10000.0,
        clip_qkv=8.0, attention_bias=False, tie_word_embeddings=False, pad_token_id=1, eos_token_id=50279)),
    "olmoe_1b_7b": ("olmoe", dict(
        vocab_size=50304, hidden_size=2048, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16,
        intermediate_size=1024, num_experts=64, num_experts_per_tok=8, norm_topk_prob=False, hidden_act="silu",
        max_position_embeddings=4096, rope_theta=10000.0, clip_qkv=None, rms_norm_eps=1e-5,
        tie_word_embeddings=False, pad_token_id=1, eos_token_id=50279)),
}
#: The study's induction heads (its per-head data: docs/reproduction.md), as the ablation group.
GROUPS = {"pythia_1b": ["4.4", "7.1", "7.0"], "olmo_1b_0724": ["2.11", "4.12", "12.8"],
          "olmoe_1b_7b": ["2.11", "4.12", "12.8"]}
#: --tiny: the same families at toy size, for the CPU check of the script's logic.
TINY = dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=128, max_position_embeddings=256)
TINY_MOE = dict(num_experts=4, num_experts_per_tok=2, intermediate_size=32)
TINY_GROUP = ["1.0", "1.2"]
STUDY_SEQUENCES = 2000


def make_config(name: str, tiny: bool):
    from transformers import GPTNeoXConfig, OlmoConfig, OlmoeConfig

    model_type, values = CONFIGS[name]
    values = dict(values)
    if tiny:
        values.update(TINY)
        if model_type == "olmoe":
            values.update(TINY_MOE)
        if model_type == "gpt_neox":
            values.pop("num_key_value_heads")
        for k in ("pad_token_id", "eos_token_id"):
            if k in values:
                values[k] = 1
    cls = {"gpt_neox": GPTNeoXConfig, "olmo": OlmoConfig, "olmoe": OlmoeConfig}[model_type]
    return model_type, cls(**values)


def model_cfg(name: str, family: str, cache: Path):
    """The config a job would hold for these revisions: a local folder source, ``dtype: auto``."""
    from omegaconf import OmegaConf

    return OmegaConf.create({"name": name, "repo": None, "path": str(cache), "family": family,
                             "pretraining_corpus": "random", "revisions": "folder", "dtype": "auto",
                             "tokens": {"tokens_per_step": None}})


def study_screen(group, controls: int, n_sequences: int):
    from emergence.catalog import compose

    cfg = compose(["model=toy_neox", "corpus=xu2026", "screen=xu2026"])
    screen = cfg.screen
    screen.ablation.group, screen.ablation.heads = "list", list(group)
    screen.ablation.controls, screen.ablation.n_sequences = controls, n_sequences
    return cfg.corpus, screen


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def save_remote(name: str, args, remote: Path):
    """The model at random init, saved once in the family's accelerator dtype; returns (family, GB)."""
    import torch
    from transformers import AutoModelForCausalLM

    from emergence.loading import choose_dtype

    model_type, config = make_config(name, args.tiny)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    model.to(choose_dtype(model_type, "auto", args.device)).save_pretrained(remote, safe_serialization=True)
    del model
    gc.collect()
    return model_type, sum(f.stat().st_size for f in remote.rglob("*") if f.is_file()) / 2**30


def yardstick(loaded, probe, screen_cfg) -> dict:
    """Screen pass (no ablation) against the decoder-only forward on the same probe, synchronised."""
    import torch
    from omegaconf import OmegaConf

    from emergence.screens import screen
    from emergence.screens.base import base_model

    plain = OmegaConf.merge(screen_cfg, {"ablation": None})
    decoder = base_model(loaded.model)
    out = {}
    for route in ("decoder", "screen", "decoder", "screen"):  # interleaved, second round kept
        sync(loaded.device)
        tic = time.perf_counter()
        if route == "decoder":
            from emergence.loading import matmul_precision

            with torch.inference_mode(), matmul_precision(loaded.matmul_precision):
                for ids in probe.batches():
                    decoder(input_ids=ids.to(loaded.device), use_cache=False)
        else:
            screen(loaded.model, loaded.adapter, probe, plain, progress=False, precision=loaded.matmul_precision)
        sync(loaded.device)
        out[route] = time.perf_counter() - tic
    return out


def precision_check(loaded, probe, screen_cfg) -> dict:
    """TF32 against float32 on one screen pass: largest relative selectivity difference and
    flags that differ at the thresholds."""
    import numpy as np
    from omegaconf import OmegaConf

    from emergence.screens import screen

    plain = OmegaConf.merge(screen_cfg, {"ablation": None})
    results, seconds = {}, {}
    for name in ("float32", "tf32"):
        sync(loaded.device)
        tic = time.perf_counter()
        results[name] = screen(loaded.model, loaded.adapter, probe, plain, progress=False, precision=name)
        sync(loaded.device)
        seconds[name] = time.perf_counter() - tic
    a, b = results["float32"].heads, results["tf32"].heads
    sel = [c for c in a.columns if c.startswith("selectivity.")]
    worst = max(float(np.nanmax(np.abs(b[c] / a[c] - 1))) for c in sel)
    flips = int(sum((a[c] != b[c]).sum() for c in a.columns if c.startswith("flag.")))
    return {"max_rel": worst, "flag_flips": flips, "seconds": seconds}


def batch_for(loaded, probe, rows, args, reserve: int) -> int:
    """The job's batch plan (emergence/loading.py), less room for a model loading ahead on CUDA."""
    from emergence.loading import plan_batch_size

    memory_gb = None if args.device.type == "cuda" else 4.0
    plan = plan_batch_size(loaded.model.config, probe.seq_len, loaded.dtype, loaded.device, memory_gb,
                           args.max_batch, rows=rows)
    if args.device.type != "cuda":
        return plan.batch_size
    return max(1, min(plan.batch_size, int((plan.budget_bytes - reserve) // plan.per_sequence_bytes)))


def run_model(name: str, args, work: Path) -> dict:
    import torch

    from emergence.loading import load
    from emergence.prefetch import Pipeline
    from emergence.probes import xu2026
    from emergence.revisions import Revision
    from emergence.screens import screen
    from emergence.screens.recipes import recipe_for

    remote, cache = work / name / "remote", work / name / "cache"
    cache.mkdir(parents=True)
    family, size_gb = save_remote(name, args, remote)
    cfg = model_cfg(name, family, cache)
    revisions = [Revision(1000 * (i + 1), 0, f"step{1000 * (i + 1)}") for i in range(args.revisions)]
    group = TINY_GROUP if args.tiny else GROUPS[name]
    corpus, screen_cfg = study_screen(group, args.controls, args.n_sequences)
    vocab_hi = min(corpus.vocab_hi, make_config(name, args.tiny)[1].vocab_size)
    probe = xu2026(args.n_sequences, corpus.seq_len, min(corpus.vocab_lo, vocab_hi - 2), vocab_hi, corpus.seed, 1)
    times = {r.name: {} for r in revisions}

    def fetch(rev):
        tic = time.perf_counter()
        dest = cache / rev.name
        shutil.copytree(remote, dest)
        if args.fetch_gbps:
            time.sleep(max(size_gb / args.fetch_gbps - (time.perf_counter() - tic), 0.0))
        return dest

    def load_ahead(rev, folder):
        return load(cfg, rev, device=str(args.device), progress=False, folder=str(folder), precision="auto")

    def evict(rev, folder):
        shutil.rmtree(folder, ignore_errors=True)

    out = {"family": family, "revision_gb": size_gb, "group": group, "revisions": times}
    rows = recipe_for(screen_cfg).attention_rows(screen_cfg, probe.seq_len)
    # The yardstick and the precision check first, on the remote folder (untimed by the pipeline).
    loaded = load(cfg, revisions[0], device=str(args.device), progress=False, folder=str(remote), precision="auto")
    probe.batch_size = batch_for(loaded, probe, rows, args, reserve=0)
    out["yardstick"] = yardstick(loaded, probe, screen_cfg)
    if loaded.dtype == torch.float32 and (args.device.type == "cuda" or args.tiny):  # (dry: the code path only)
        out["precision"] = precision_check(loaded, probe, screen_cfg)
    del loaded
    gc.collect()
    tic_all = time.perf_counter()
    for got in Pipeline(revisions, fetch, evict, ahead=1, load=load_ahead):
        if got.error is not None:
            raise got.error
        loaded, row = got.loaded, times[got.item.name]
        tic = time.perf_counter()
        reserve = sum(p.numel() * p.element_size() for p in loaded.model.parameters())  # the next model loading
        probe.batch_size = batch_for(loaded, probe, rows, args, reserve)
        if args.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(args.device)
        result = screen(loaded.model, loaded.adapter, probe, screen_cfg, progress=False,
                        precision=loaded.matmul_precision)
        sync(args.device)
        total = time.perf_counter() - tic
        row.update(fetch_s=got.fetch_s, load_s=got.load_s, waited_s=got.waited_s,
                   ablation_s=result.metrics["ablation_seconds"], batch=probe.batch_size,
                   precision=loaded.matmul_precision, dtype=str(loaded.dtype).replace("torch.", ""))
        row["screen_s"] = total - row["ablation_s"]
        row["peak_gb"] = torch.cuda.max_memory_allocated(args.device) / 2**30 if args.device.type == "cuda" else None
        row["wall_s"] = time.perf_counter() - tic_all  # since the previous revision was done
        print(f"  {name} {got.item.name}: {row}", flush=True)
        del loaded
        got.loaded = None
        tic_all = time.perf_counter()
    shutil.rmtree(work / name, ignore_errors=True)
    gc.collect()
    if args.device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def write_results(path: Path, args, results: dict) -> None:
    import torch

    where = torch.cuda.get_device_name(args.device) if args.device.type == "cuda" else "CPU (dry run, tiny configs)"
    scale = STUDY_SEQUENCES / args.n_sequences
    lines = ["# GPU benchmark results (`benchmarks/gpu_1b.py`)", ""]
    if args.device.type != "cuda":
        lines += ["**Not run on a GPU yet.** This is a dry run on the CPU with tiny configs: the figures only show",
                  "that the script runs end to end; they are not measurements.", ""]
    lines += [f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC} on {where}; torch {torch.__version__}; "
              f"{'tiny configs' if args.tiny else 'study-size configs'}, random weights; load average "
              f"{os.getloadavg()[0]:.2f}.",
              f"Recipe: corpus=xu2026 screen=xu2026 with ablation ({args.n_sequences} sequences x T = 256; group, "
              f"{args.controls} matched controls and the whole-layer bound); {args.revisions} revisions a model, "
              f"the next fetched and loaded while one is screened.", "",
              "| model | revision | dtype / matmuls | batch | fetch s | load s | waited s | screen s | ablation s | "
              "wall s / revision | projected to 2,000 sequences (screen + ablation) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for name, r in results.items():
        for rev, t in r["revisions"].items():
            lines.append(f"| {name} | {rev} | {t['dtype']} / {t['precision']} | {t['batch']} | {t['fetch_s']:.1f} | "
                         f"{t['load_s']:.1f} | {t['waited_s']:.1f} | {t['screen_s']:.1f} | {t['ablation_s']:.1f} | "
                         f"{t['wall_s']:.1f} | {scale * (t['screen_s'] + t['ablation_s']):.0f} s |")
        y = r.get("yardstick")
        if y:
            ratio = y["screen"] / y["decoder"]
            notes.append(f"- {name}: screen pass / decoder-only forward = {ratio:.2f}x (goal <= 1.1x) "
                         f"{'PASS' if ratio <= 1.1 else 'FAIL'}")
        p = r.get("precision")
        if p:
            notes.append(f"- {name}: TF32 vs float32 screen: largest relative selectivity difference {p['max_rel']:.2e}, "
                         f"{p['flag_flips']} flags differ; {p['seconds']['float32']:.1f} s vs {p['seconds']['tf32']:.1f} s")
    lines += ["", *notes]
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(CONFIGS))
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (only with --tiny)")
    parser.add_argument("--tiny", action="store_true", help="tiny configs of the same families")
    parser.add_argument("--dry", action="store_true", help="= --device cpu --tiny, small probe, output to /tmp")
    parser.add_argument("--quick", action="store_true", help="500 sequences a revision (times also projected)")
    parser.add_argument("--n-sequences", type=int, default=STUDY_SEQUENCES)
    parser.add_argument("--controls", type=int, default=10)
    parser.add_argument("--revisions", type=int, default=2)
    parser.add_argument("--max-batch", type=int, default=512, help="upper bound of the planned batch")
    parser.add_argument("--fetch-gbps", type=float, default=0.0,
                        help="throttle the simulated download to this many GB/s (0: plain local copy)")
    parser.add_argument("--workdir", default=None, help="folder for the revisions (default: the temp dir)")
    parser.add_argument("--out", default=None, help="default: benchmarks/RESULTS.md (dry: a temp file)")
    args = parser.parse_args()
    if args.dry:
        args.device, args.tiny, args.n_sequences, args.revisions, args.controls = "cpu", True, 24, 2, 3
    elif args.quick:
        args.n_sequences = 500
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_1b.py needs a CUDA GPU and none is available (use --dry to check the script on the CPU)",
              file=sys.stderr)
        return 2
    if args.device == "cpu" and not args.tiny:
        print("gpu_1b.py on the CPU runs only the tiny configs: add --tiny (or use --dry)", file=sys.stderr)
        return 2
    args.device = torch.device(args.device)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in CONFIGS]
    if unknown:
        print(f"unknown model {unknown[0]!r}; valid: {', '.join(CONFIGS)}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else (Path(tempfile.gettempdir()) / "gpu_1b_dry_RESULTS.md" if args.tiny
                                           else ROOT / "benchmarks" / "RESULTS.md")
    print(f"gpu_1b: {models} on {args.device}; {args.n_sequences} sequences; {args.revisions} revisions a model",
          flush=True)
    work = Path(tempfile.mkdtemp(prefix="gpu_1b_", dir=args.workdir))
    try:
        results = {name: run_model(name, args, work) for name in models}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_results(out, args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
