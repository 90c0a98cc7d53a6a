"""GPU benchmark at study size: streaming screen vs bare / naive / TransformerLens 4, and prefetch (issue 13, point 5).

On randomly initialised models of the study's three sizes, built from their published
configs written out below (no download):

- ``pythia_1b``: EleutherAI/pythia-1b (GPT-NeoX, 16 x 8 heads, d_model 2048), fp32;
- ``olmo_1b_0724``: allenai/OLMo-1B-0724-hf (16 x 16, d_model 2048, clip_qkv 8), bf16;
- ``olmoe_1b_7b``: allenai/OLMoE-1B-7B-0924 (16 x 16, 64 experts top-8), bf16;

each route of ``bench_screen_tl.py`` (bare eager forward, the project's streaming
``screen()`` with all classes and PR, the naive all-layer ``output_attentions``
route, TransformerLens 4 ``TransformerBridge`` + ``run_with_cache`` + ``detect_head``)
runs on the same synthetic induction probe on CUDA (best of ``--repeats`` after a
warm-up, synchronised); peak memory is ``torch.cuda.max_memory_allocated`` over what
was allocated before the route (weights and probe).

Then the download pipeline against a local folder of revisions: ``--revisions``
copies of one model (``--pipeline-model``) saved with ``save_pretrained`` in a
"remote" folder; per revision, fetch = copy the revision into a cache folder (the
download; ``--fetch-gbps`` throttles it to a network's speed), screen =
``from_pretrained`` onto the GPU and the streaming screen; evict = delete the cached
copy. Time per revision is measured with
``emergence.prefetch.Pipeline`` at ``ahead=0`` (sequential) and ``ahead=1`` (the next
revision fetched while this one is screened); if that module is missing the sequential
time only is reported.

    python benchmarks/gpu_1b.py                        # needs CUDA; writes benchmarks/RESULTS.md
    python benchmarks/gpu_1b.py --dry                  # = --device cpu --tiny: tiny configs on the CPU,
                                                       #   proves the script end to end (writes to /tmp)
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

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
#: --tiny: the same families at toy size, for the CPU check of the script's logic.
TINY = dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=128, max_position_embeddings=256)
TINY_MOE = dict(num_experts=4, num_experts_per_tok=2, intermediate_size=32)
SEGMENT = 31
ROUTES = ("bare", "streaming", "naive", "tl")


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


def dtype_for(model_type: str, device):
    import torch

    # bf16 on GPU, fp32 on CPU, and never reduced precision for GPT-NeoX/Pythia here (fp32).
    return torch.float32 if device.type == "cpu" or model_type == "gpt_neox" else torch.bfloat16


def build_model(name: str, device, tiny: bool, seed: int = 0):
    import torch
    from transformers import AutoModelForCausalLM

    model_type, config = make_config(name, tiny)
    dtype = dtype_for(model_type, device)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="eager")
    return model.eval(), dtype


class Meter:
    """Wall time (synchronised) and peak memory over the baseline: CUDA allocator, or RSS on the CPU."""

    def __init__(self, device):
        self.device = device

    def sync(self):
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __enter__(self):
        import torch

        gc.collect()
        self.sync()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            with open("/proc/self/statm") as f:
                self.base = int(f.read().split()[1]) * resource.getpagesize()
        self.tic = time.perf_counter()
        return self

    def __exit__(self, *exc):
        import torch

        self.sync()
        self.wall = time.perf_counter() - self.tic
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device)
        else:  # the process high-water mark: only meaningful for the first route to exceed it
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.peak_gb = max(peak - self.base, 0) / 2**30
        return False


def run_routes(name: str, args, device) -> dict:
    """Each route on one model: warm-up, then the best of ``args.repeats``."""
    import torch
    from omegaconf import OmegaConf

    import bench_screen_tl as b
    from emergence.adapters import adapter_for
    from emergence.config import ScreenConfig
    from emergence.probes import synthetic_induction
    from emergence.screens import screen

    model, dtype = build_model(name, device, args.tiny)
    vocab = model.config.vocab_size
    probe = synthetic_induction(range(2, vocab), args.n_sequences, SEGMENT, first_token=0, seed=0,
                                batch_size=args.batch_size)
    probe.input_ids = probe.input_ids.to(device)
    cfg = OmegaConf.structured(ScreenConfig(participation_ratio=True))
    adapter = adapter_for(model)
    bridge = None

    def bare():
        with torch.no_grad():
            for ids in probe.batches():
                model(ids)

    def streaming():
        screen(model, adapter, probe, cfg, progress=False)

    def naive():
        b.naive_route(model, probe)

    def tl():
        b.tl_route(bridge, probe)

    fns = {"bare": bare, "streaming": streaming, "naive": naive, "tl": tl}
    out = {"dtype": str(dtype).replace("torch.", ""), "params_b": sum(p.numel() for p in model.parameters()) / 1e9,
           "routes": {}}
    tokens = probe.input_ids.numel()
    for route in args.routes:  # tl last: the bridge rewires the model in place
        try:
            if route == "tl":
                bridge = b.make_bridge(model)
            fns[route]()  # warm-up (kernels, allocator)
            walls, peaks = [], []
            for _ in range(args.repeats):
                with Meter(device) as m:
                    fns[route]()
                walls.append(m.wall)
                peaks.append(m.peak_gb)
            out["routes"][route] = {"wall_s": min(walls), "tokens_s": tokens / min(walls), "peak_gb": max(peaks)}
        except Exception as exc:  # noqa: BLE001  (one route failing must not lose the others)
            out["routes"][route] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
        print(f"  {name} {route}: {out['routes'][route]}", flush=True)
    model = bridge = None  # drop the references before collecting (a del confuses ruff's F821 in the closures)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def pipeline_bench(args, device) -> dict:
    """Time per revision, sequential vs one-ahead prefetch, on a local folder of revisions."""
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM

    from emergence.adapters import adapter_for
    from emergence.config import ScreenConfig
    from emergence.probes import synthetic_induction
    from emergence.screens import screen

    try:
        from emergence.prefetch import Pipeline
    except ImportError:
        Pipeline = None

    work = Path(tempfile.mkdtemp(prefix="gpu_1b_revisions_", dir=args.workdir))
    remote, cache = work / "remote", work / "cache"
    cache.mkdir(parents=True)
    cpu_model, _ = build_model(args.pipeline_model, torch.device("cpu"), args.tiny)
    model_type, _ = make_config(args.pipeline_model, args.tiny)
    dtype = dtype_for(model_type, device)
    cpu_model.to(dtype)
    names = [f"step{1000 * (i + 1)}" for i in range(args.revisions)]
    for i, rev in enumerate(names):  # same weights each time: only the bytes matter here
        cpu_model.save_pretrained(remote / rev, safe_serialization=True)
    size_gb = sum(f.stat().st_size for f in (remote / names[0]).rglob("*") if f.is_file()) / 2**30
    vocab = cpu_model.config.vocab_size
    del cpu_model
    probe = synthetic_induction(range(2, vocab), args.n_sequences, SEGMENT, first_token=0,
                                seed=0, batch_size=args.batch_size)
    probe.input_ids = probe.input_ids.to(device)
    cfg = OmegaConf.structured(ScreenConfig(participation_ratio=True))
    fetch_s, screen_s = [], []

    def fetch(rev):
        """The download: a copy into the cache, throttled to ``--fetch-gbps`` when given."""
        tic = time.perf_counter()
        dest = cache / rev
        shutil.copytree(remote / rev, dest)
        if args.fetch_gbps:
            time.sleep(max(size_gb / args.fetch_gbps - (time.perf_counter() - tic), 0.0))
        fetch_s.append(time.perf_counter() - tic)
        return dest

    def evict(rev, dest):
        shutil.rmtree(dest, ignore_errors=True)

    def screen_one(dest):
        tic = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(dest, dtype=dtype, attn_implementation="eager",
                                                     device_map=str(device)).eval()
        screen(model, adapter_for(model), probe, cfg, progress=False)
        del model
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        screen_s.append(time.perf_counter() - tic)

    out = {"model": args.pipeline_model, "revisions": len(names), "revision_gb": size_gb, "modes": {}}
    modes = [("sequential", 0), ("prefetch", 1)] if Pipeline is not None else [("sequential", 0)]
    for mode, ahead in modes:
        fetch_s.clear()
        screen_s.clear()
        tic = time.perf_counter()
        if Pipeline is not None:
            for item in Pipeline(names, fetch, evict, ahead=ahead):
                if item.error is not None:
                    raise item.error
                screen_one(item.value)
        else:
            for rev in names:
                value = fetch(rev)
                screen_one(value)
                evict(rev, value)
        total = time.perf_counter() - tic
        out["modes"][mode] = {"per_revision_s": total / len(names), "fetch_s": sum(fetch_s) / len(fetch_s),
                              "screen_s": sum(screen_s) / len(screen_s)}
        print(f"  pipeline {mode}: {out['modes'][mode]}", flush=True)
    out["prefetch_available"] = Pipeline is not None
    shutil.rmtree(work, ignore_errors=True)
    return out


def write_results(path: Path, args, device, results: dict, pipe: dict) -> None:
    import torch

    tokens = args.n_sequences * (2 * SEGMENT + 1)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (dry run, tiny configs)"
    mem = "peak GPU memory over weights+probe (GB)" if device.type == "cuda" else "peak RSS rise (GB, CPU)"
    lines = [
        "# GPU benchmark results (`benchmarks/gpu_1b.py`)", "",
        f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC} on {where}; torch {torch.__version__}; "
        f"{'tiny configs' if args.tiny else 'study-size configs'}, random weights.",
        f"Probe: synthetic induction, {args.n_sequences} sequences x {2 * SEGMENT + 1} tokens ({tokens} tokens), "
        f"batches of {args.batch_size}; best of {args.repeats} after a warm-up.", "",
        f"| model | dtype | route | tokens/s | {mem} | time / streaming |",
        "|---|---|---|---|---|---|",
    ]
    verdicts = []
    for name, r in results.items():
        routes = r["routes"]
        s = routes.get("streaming", {})
        for route, v in routes.items():
            if "error" in v:
                lines.append(f"| {name} | {r['dtype']} | {route} | failed: {v['error']} | | |")
                continue
            rel = f"{v['wall_s'] / s['wall_s']:.2f}x" if "wall_s" in s else ""
            lines.append(f"| {name} | {r['dtype']} | {route} | {v['tokens_s']:.0f} | {v['peak_gb']:.3f} | {rel} |")
        if "wall_s" in s:
            bare, tl = routes.get("bare", {}), routes.get("tl", {})
            if "wall_s" in bare:
                x = s["wall_s"] / bare["wall_s"]
                verdicts.append(f"- {name}: time streaming / bare {x:.2f}x (goal <= 1.1x) {'PASS' if x <= 1.1 else 'FAIL'}")
            if "wall_s" in tl:
                t, m = tl["wall_s"] / s["wall_s"], tl["peak_gb"] / max(s["peak_gb"], 1e-12)
                mem_verdict = (f"peak memory tl / streaming {m:.1f}x (goal >= 4x) {'PASS' if m >= 4 else 'FAIL'}"
                               if device.type == "cuda" else "peak memory: not comparable on the CPU (one process, "
                               "RSS high-water mark)")
                verdicts.append(f"- {name}: throughput streaming / tl {t:.2f}x (goal >= 2x) {'PASS' if t >= 2 else 'FAIL'}; "
                                + mem_verdict)
    if device.type != "cuda":
        verdicts.append("\n**Dry run on the CPU with tiny configs: these figures only show that the script runs "
                        "end to end; they are not measurements.**")
    lines += ["", *verdicts, "", f"## Time per revision ({pipe['model']}, {pipe['revisions']} local revisions of "
              f"{pipe['revision_gb']:.2f} GB)", "",
              "| mode | time per revision (s) | fetch (copy into the cache, s) | load onto device + screen (s) |",
              "|---|---|---|---|"]
    for mode, v in pipe["modes"].items():
        lines.append(f"| {mode} | {v['per_revision_s']:.2f} | {v['fetch_s']:.2f} | {v['screen_s']:.2f} |")
    if not pipe["prefetch_available"]:
        lines.append("\nemergence.prefetch is not available yet: only the sequential load + screen was measured.")
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(CONFIGS))
    parser.add_argument("--routes", default=",".join(ROUTES))
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (only with --tiny)")
    parser.add_argument("--tiny", action="store_true", help="tiny configs of the same families")
    parser.add_argument("--dry", action="store_true", help="= --device cpu --tiny, small probe, output to /tmp")
    parser.add_argument("--n-sequences", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--revisions", type=int, default=4)
    parser.add_argument("--pipeline-model", default="pythia_1b")
    parser.add_argument("--fetch-gbps", type=float, default=0.0,
                        help="throttle the simulated download to this many GB/s (0: plain local copy)")
    parser.add_argument("--workdir", default=None, help="folder for the local revisions (default: the temp dir)")
    parser.add_argument("--out", default=None, help="default: benchmarks/RESULTS.md (dry: a temp file)")
    args = parser.parse_args()
    if args.dry:
        args.device, args.tiny = "cpu", True
        args.n_sequences, args.batch_size, args.repeats, args.revisions = 8, 4, 1, 2
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_1b.py needs a CUDA GPU and none is available (use --dry to check the script on the CPU)",
              file=sys.stderr)
        return 2
    if args.device == "cpu" and not args.tiny:
        print("gpu_1b.py on the CPU runs only the tiny configs: add --tiny (or use --dry)", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    args.models = [m for m in args.models.split(",") if m]
    args.routes = [r for r in ROUTES if r in args.routes.split(",")]
    unknown = [m for m in args.models + [args.pipeline_model] if m not in CONFIGS]
    if unknown:
        print(f"unknown model {unknown[0]!r}; valid: {', '.join(CONFIGS)}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else (Path(tempfile.gettempdir()) / "gpu_1b_dry_RESULTS.md" if args.tiny
                                           else ROOT / "benchmarks" / "RESULTS.md")
    print(f"gpu_1b: {args.models} on {device}; {args.n_sequences} sequences in batches of {args.batch_size}; "
          f"routes {args.routes}", flush=True)
    results = {name: run_routes(name, args, device) for name in args.models}
    pipe = pipeline_bench(args, device)
    write_results(out, args, device, results, pipe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
