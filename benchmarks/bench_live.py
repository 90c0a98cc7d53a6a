"""Live screening on the toy: overhead, checkpoints saved, and how tightly transitions are bracketed.

    python benchmarks/bench_live.py [--model toy_neox] [--repeats 1] [--out DIR] [--keep DIR]

Each repeat trains the model's recipe twice from scratch, in subprocesses, into fresh
folders: with its fixed schedule (``live=off``: 65 checkpoints) and with ``live=adaptive``
(the monitor of conf/live/adaptive.yaml, its runs into a fresh store). Printed:

- **overhead**: the live training's wall time over the fixed one's, minus 1 (goal: at most
  10 %), and the monitor's own share of the live session (the time inside ``monitor.step``:
  screens, lookback copies, checkpoint writes; the store is written by a background thread);
- **checkpoints** saved: the adaptive suite's against the fixed 65;
- **brackets**: for induction and BOS, the interval between adjacent checkpoints that holds
  the largest jump of the count (emergence.refine.find_bracket, the rule of
  ``revision=refine`` and of the ``sharp`` verdict), its width in decades of tokens; for the
  adaptive suite over its saved checkpoints (their live runs), for the fixed schedule after
  ``revision=logspaced`` then ``revision=refine`` (the job as a user runs it, with the same
  64-sequence probe and screen as the live runs, so both read the same counts), and over
  every live screen (the finest the watch grid sees). Goal for the toy: the induction
  bracket at most 0.03 decades with at most 40 checkpoints.

A figure of the live counts with the saved checkpoints goes to ``--out`` (default
``outputs/bench_live``), with ``results.json``. Run it with ``nice -n 10`` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = ["corpus.n_sequences=64", "screen.participation_ratio=false"]

TRAIN = r"""
import json, sys, time
from emergence.registry import compose
cfg = compose(json.loads(sys.argv[1]))
start = time.perf_counter()
if cfg.live.mode == "off":
    from emergence.toy import ensure_trained
    folder, extra = ensure_trained(cfg.model.recipe, cfg.cache.toy_dir, cfg.model.name, progress=False), {}
else:
    from emergence.live.toy import ensure_trained_live
    folder, _logged = ensure_trained_live(cfg, progress=False)
    extra = json.loads((folder / "revisions.json").read_text())["live"]
print(json.dumps({"folder": str(folder), "wall_s": time.perf_counter() - start, **extra}))
"""


def train(overrides) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", TRAIN, json.dumps(overrides)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"training failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def width(bracket) -> float:
    lo = bracket.lo.tokens or bracket.hi.tokens
    return math.log10(bracket.hi.tokens / lo)


def describe(bracket) -> str:
    if bracket is None:
        return "no jump"
    return (f"{bracket.lo.name} -> {bracket.hi.name} ({bracket.k_lo:g} -> {bracket.k_hi:g} heads), "
            f"{width(bracket):.4f} decades")


def live_runs(uri: str, model: str):
    """(every live screen, the saved ones): Revision -> metrics, from the store."""
    import mlflow

    from emergence.revisions import Revision

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("emergence")
    every, saved = {}, {}
    for run in client.search_runs([exp.experiment_id], max_results=50000):
        p = run.data.params
        if p.get("model") != model:
            continue
        r = Revision(int(p["tokens"]), int(p["step"]), p["revision"])
        every[r] = run.data.metrics
        if run.data.tags.get("emergence.live.checkpoint") == "saved":
            saved[r] = run.data.metrics
    return every, saved


def fixed_refined(model: str, toy_dir: Path, uri: str) -> dict:
    """``revision=logspaced`` then ``revision=refine`` on the fixed suite: the final brackets."""
    from emergence.job import refine_plan, run_job, screened_runs
    from emergence.registry import compose, model_revisions

    base = [f"model={model}", *PROBE, f"cache.toy_dir={toy_dir}", f"tracking.uri={uri}", "stats=false"]
    tic = time.perf_counter()
    run_job(compose(base), progress=False)
    cfg = compose(base + ["revision=refine", "revision.refine.rounds=12"])
    run_job(cfg, progress=False)
    known = model_revisions(cfg.model)
    runs = screened_runs(cfg, known)
    plan = refine_plan(cfg, known, runs)
    return {"brackets": plan.brackets, "screens": len(runs), "seconds": time.perf_counter() - tic}


def figure(path: Path, model: str, every, saved, brackets) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for ax, cls in zip(axes, ("induction", "bos")):
        pts = sorted((r.tokens, m[f"count.{cls}"]) for r, m in every.items() if r.tokens > 0)
        ax.plot([t for t, _ in pts], [k for _, k in pts], "-", color="0.6", lw=1, label="every live screen")
        sv = sorted((r.tokens, m[f"count.{cls}"]) for r, m in saved.items() if r.tokens > 0)
        ax.plot([t for t, _ in sv], [k for _, k in sv], "o", ms=4, color="C0", label="saved checkpoint")
        b = brackets.get(cls)
        if b is not None:
            ax.axvspan(b.lo.tokens or b.hi.tokens, b.hi.tokens, color="C1", alpha=0.3,
                       label=f"largest jump: {width(b):.3f} decades")
        ax.set_xscale("log")
        ax.set_ylabel(f"{cls} heads")
        ax.legend(loc="upper left", fontsize=8)
    axes[1].set_xlabel("training tokens")
    axes[0].set_title(f"{model}, live=adaptive: {len(saved)} checkpoints saved, {len(every)} live screens")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="toy_neox")
    parser.add_argument("--repeats", type=int, default=1, help="fixed/live training pairs (overhead: the median)")
    parser.add_argument("--out", default=str(ROOT / "outputs" / "bench_live"))
    parser.add_argument("--keep", default=None, help="train into this folder and keep it")
    args = parser.parse_args(argv)
    from emergence.refine import find_bracket

    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_live-"))
    work.mkdir(parents=True, exist_ok=True)
    pairs = []
    for i in range(args.repeats):
        fixed = train([f"model={args.model}", f"cache.toy_dir={work}/fixed{i}"])
        live_uri = f"sqlite:///{work}/live{i}/mlflow.db"
        live = train([f"model={args.model}", "live=adaptive", f"cache.toy_dir={work}/live{i}",
                      f"tracking.uri={live_uri}"])
        pairs.append((fixed, live, live_uri))
        print(f"repeat {i + 1}: fixed {fixed['wall_s']:.1f} s, live {live['wall_s']:.1f} s "
              f"({live['wall_s'] / fixed['wall_s'] - 1:+.1%}); {live['screens_last_session']} screens, "
              f"{live['screen_seconds_last_session']:.1f} s screening", flush=True)
    overheads = [lv["wall_s"] / fx["wall_s"] - 1 for fx, lv, _ in pairs]
    fixed, live, live_uri = pairs[-1]
    folder = Path(live["folder"])
    registry_live = json.loads((folder / "revisions.json").read_text())["revisions"]
    every, saved = live_runs(live_uri, args.model)
    refined = fixed_refined(args.model, work / f"fixed{args.repeats - 1}", f"sqlite:///{work}/fixed.db")
    classes = ("induction", "bos")
    adaptive = {c: find_bracket({r: m[f"count.{c}"] for r, m in saved.items()}, c, sorted(saved)) for c in classes}
    finest = {c: find_bracket({r: m[f"count.{c}"] for r, m in every.items()}, c, sorted(every)) for c in classes}

    print(f"\n{args.model}: live=adaptive against the fixed schedule ({time.strftime('%Y-%m-%d')})")
    print("| | fixed schedule + revision=refine | live=adaptive |")
    print("|---|---|---|")
    print(f"| checkpoints saved | 65 | {len(registry_live)} |")
    print(f"| screens | {refined['screens']} (logspaced + refine, after training; {refined['seconds']:.0f} s) | "
          f"{len(every)} during training ({len(saved)} of saved checkpoints) |")
    print(f"| training wall time | {fixed['wall_s']:.1f} s | {live['wall_s']:.1f} s "
          f"(overhead {statistics.median(overheads):+.1%}, median of {len(overheads)}) |")
    for c in classes:
        print(f"| {c}: largest jump | {describe(refined['brackets'].get(c))} | {describe(adaptive[c])} |")
    monitor_s = live["monitor_seconds_last_session"]
    print(f"\nmonitor: {live['screens_last_session']} screens ({live['screen_seconds_last_session']:.1f} s), "
          f"{monitor_s:.1f} s in monitor.step in all: {monitor_s / (live['wall_s'] - monitor_s):.1%} of the "
          f"live session's training time (measured in the same process, so less exposed to the load of a shared "
          f"machine than the two wall times); {live['failed_screens_last_session']} failed screens")
    for c in classes:
        print(f"finest the watch grid sees ({c}, over all {len(every)} screens): {describe(finest[c])}")
    ind = adaptive["induction"]
    ok = ind is not None and width(ind) <= 0.03 and len(registry_live) <= 40
    print(f"goal (induction jump within <= 0.03 decades, <= 40 checkpoints): {'PASS' if ok else 'FAIL'}; "
          f"overhead goal (<= 10%): {'PASS' if statistics.median(overheads) <= 0.10 else 'FAIL'}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figure(out / f"live_{args.model}.png", args.model, every, saved, adaptive)
    results = {"model": args.model, "overheads": overheads, "monitor_seconds": monitor_s, "fixed_wall_s": [p[0]["wall_s"] for p in pairs],
               "live_wall_s": [p[1]["wall_s"] for p in pairs], "checkpoints_live": len(registry_live),
               "checkpoints_fixed": 65, "screens_live": len(every), "screens_fixed_refine": refined["screens"],
               "brackets": {c: {"fixed_refine": describe(refined["brackets"].get(c)), "adaptive": describe(adaptive[c]),
                                "every_screen": describe(finest[c])} for c in classes},
               "live_revisions": registry_live}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"figure and results: {out}")
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
