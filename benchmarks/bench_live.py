"""Live screening on the toy: overhead, checkpoints saved, and how tightly transitions are bracketed.

    python benchmarks/bench_live.py [--model toy_neox] [--out DIR] [--keep DIR] [--set KEY=VALUE ...]

The recipe is trained from scratch twice *in lockstep*, in one process: model A with its
fixed schedule (``live=off``: 65 checkpoints), model B with ``live=adaptive`` (the monitor of
conf/live/adaptive.yaml, its runs into a fresh store), one update of each in turn (the order
alternating), with the toy trainer's own update, checkpoint and resume-state writes
(emergence/toy/train.py). Both see the same load at the same moment, which two separate
trainings on a shared machine do not. Printed:

- **overhead**: B's time over A's, minus 1 (goal: at most 10 %); B's time includes the
  time inside ``monitor.step`` (screens, lookback copies, its checkpoint writes) and, to be
  conservative, all the CPU time of the monitor's store-writing thread;
- that A and B end with the same weights (bit for bit);
- **checkpoints** saved: the adaptive suite's against the fixed 65;
- **brackets**: for induction and BOS, the interval between adjacent checkpoints that holds
  the largest jump of the count (emergence.refine_rule.find_bracket, the rule of
  ``revision=refine`` and of the ``sharp`` verdict), its width in decades of tokens; for the
  adaptive suite over its saved checkpoints (their live runs), for the fixed suite after
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
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = ["corpus.n_sequences=64", "screen.participation_ratio=false"]

def lockstep(model: str, work: Path, live_uri: str, sets=()) -> dict:
    """Train A (fixed schedule) and B (live monitor) one update each in turn; their times."""
    import torch

    from emergence.live.checkpoints import CheckpointFolder
    from emergence.live.monitor import LiveMonitor
    from emergence.live.toy import live_hash, live_suite_folder, suite_config
    from emergence.catalog import compose
    from emergence.toy import as_recipe, checkpoint_schedule, recipe_hash, suite_folder
    from emergence.toy.corpus import ToyCorpus
    from emergence.toy.models import build_model
    from emergence.toy.recipe import data_seed
    from emergence.toy.train import (_optimizer, _save_checkpoint, _save_state, _training_context, train_update,
                                     write_listing)

    cfg = compose([f"model={model}", "live=adaptive", f"cache.toy_dir={work}", f"tracking.uri={live_uri}", *sets])
    rec = as_recipe(cfg.model.recipe)
    fixed_folder, live_folder = suite_folder(rec, work, model), live_suite_folder(cfg)
    digest, live_digest = recipe_hash(rec), recipe_hash(rec) + f"-live-{live_hash(cfg)}"
    fixed_folder.mkdir(parents=True, exist_ok=True)
    monitor = LiveMonitor(suite_config(cfg, live_folder), CheckpointFolder(
        live_folder, listing_extra={"name": model, "recipe_hash": live_digest, "live_hash": live_hash(cfg)}))
    schedule = checkpoint_schedule(rec)
    save_at = {r["step"]: r["name"] for r in schedule}
    corpus = ToyCorpus(rec.corpus, rec.seq_len, rec.batch_size, data_seed(rec))
    per_step = int(rec.batch_size) * int(rec.seq_len)
    extra = {"output_router_logits": True} if rec.family == "olmoe" else {}
    seconds = {"fixed": 0.0, "live": 0.0}
    losses = {"fixed": [], "live": []}
    with _training_context(rec.threads):
        models = {k: build_model(rec) for k in ("fixed", "live")}
        optimizers = {k: _optimizer(m.train(), rec) for k, m in models.items()}

        def after(kind: str, done: int) -> None:
            m, opt = models[kind], optimizers[kind]
            if kind == "fixed" and done in save_at:
                _save_checkpoint(m, fixed_folder, save_at[done])
                _save_state(fixed_folder, done, m, opt, digest, losses[kind])
            if kind == "live" and monitor.step(m, done, done * per_step, final=done == rec.steps):
                _save_state(live_folder, done, m, opt, live_digest, losses[kind], live=monitor.state_dict())

        for kind in ("fixed", "live"):
            tic = time.perf_counter()
            after(kind, 0)
            seconds[kind] += time.perf_counter() - tic
        for step in range(rec.steps):
            for kind in (("fixed", "live") if step % 2 == 0 else ("live", "fixed")):
                tic = time.perf_counter()
                losses[kind].append(train_update(models[kind], optimizers[kind], rec, corpus, step, extra))
                after(kind, step + 1)
                seconds[kind] += time.perf_counter() - tic
            if (step + 1) % 250 == 0:
                print(f"  step {step + 1}: fixed {seconds['fixed']:.0f} s, live {seconds['live']:.0f} s "
                      f"({monitor.status()})", flush=True)
        same = all(torch.equal(a, b) for a, b in zip(models["fixed"].state_dict().values(),
                                                      models["live"].state_dict().values()))
    tic = time.perf_counter()
    monitor.finish()
    seconds["live"] += time.perf_counter() - tic
    write_listing(fixed_folder, rec, schedule, digest, model, seconds["fixed"], 0, losses["fixed"])
    write_listing(live_folder, rec, list(monitor.checkpoints.revisions), live_digest, model, seconds["live"], 0,
                  losses["live"], monitor)
    for folder in (fixed_folder, live_folder):
        (folder / "train_state.pt").unlink(missing_ok=True)
    return {"fixed_s": seconds["fixed"], "live_s": seconds["live"], "monitor_s": monitor.seconds,
            "writer_cpu_s": monitor.writer.cpu_seconds, "screens": monitor.screens,
            "screen_s": monitor.screen_seconds, "failed": monitor.failures, "same_weights": same,
            "live_folder": live_folder, "registry": list(monitor.checkpoints.revisions),
            "fixed_checkpoints": len(schedule)}


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


def fixed_refined(model: str, toy_dir: Path, uri: str, sets=()) -> dict:
    """``revision=logspaced`` then ``revision=refine`` on the fixed suite: the final brackets."""
    from emergence.job import run_job
    from emergence.refine_rounds import refine_plan, screened_runs
    from emergence.catalog import compose, model_revisions

    base = [f"model={model}", *PROBE, f"cache.toy_dir={toy_dir}", f"tracking.uri={uri}", "stats=false",
            *[x for x in sets if not x.startswith("live.")]]
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
    parser.add_argument("--out", default=str(ROOT / "outputs" / "bench_live"))
    parser.add_argument("--keep", default=None, help="train into this folder and keep it")
    parser.add_argument("--set", action="append", default=[], help="a config override for both trainings "
                        "(e.g. recipe@model.recipe=fast_neox, live.dense_every=10); repeatable")
    args = parser.parse_args(argv)
    from emergence.refine_rule import find_bracket

    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_live-"))
    work.mkdir(parents=True, exist_ok=True)
    live_uri = f"sqlite:///{work}/live/mlflow.db"
    print(f"training {args.model} twice in lockstep (fixed schedule / live=adaptive) into {work}", flush=True)
    t = lockstep(args.model, work, live_uri, args.set)
    every, saved = live_runs(live_uri, args.model)
    refined = fixed_refined(args.model, work, f"sqlite:///{work}/fixed/mlflow.db", args.set)
    classes = ("induction", "bos")
    adaptive = {c: find_bracket({r: m[f"count.{c}"] for r, m in saved.items()}, c, sorted(saved)) for c in classes}
    finest = {c: find_bracket({r: m[f"count.{c}"] for r, m in every.items()}, c, sorted(every)) for c in classes}
    overhead = (t["live_s"] + t["writer_cpu_s"]) / t["fixed_s"] - 1

    print(f"\n{args.model}: live=adaptive against the fixed schedule ({time.strftime('%Y-%m-%d')})")
    print("| | fixed schedule + revision=refine | live=adaptive |")
    print("|---|---|---|")
    print(f"| checkpoints saved | {t['fixed_checkpoints']} | {len(t['registry'])} |")
    print(f"| screens | {refined['screens']} (logspaced + refine, after training; {refined['seconds']:.0f} s) | "
          f"{len(every)} during training ({len(saved)} of saved checkpoints) |")
    print(f"| training time (lockstep) | {t['fixed_s']:.1f} s | {t['live_s']:.1f} s + {t['writer_cpu_s']:.1f} s "
          f"store-writer CPU: overhead {overhead:+.1%} |")
    for c in classes:
        print(f"| {c}: largest jump | {describe(refined['brackets'].get(c))} | {describe(adaptive[c])} |")
    print(f"\nmonitor: {t['screens']} screens ({t['screen_s']:.1f} s), {t['monitor_s']:.1f} s in monitor.step in all, "
          f"{t['failed']} failed screens; weights of the two trainings identical: {t['same_weights']}")
    for c in classes:
        print(f"finest the watch grid sees ({c}, over all {len(every)} screens): {describe(finest[c])}")
    ind = adaptive["induction"]
    ok = ind is not None and width(ind) <= 0.03 and len(t["registry"]) <= 40
    print(f"goal (induction jump within <= 0.03 decades, <= 40 checkpoints): {'PASS' if ok else 'FAIL'}; "
          f"overhead goal (<= 10%): {'PASS' if overhead <= 0.10 else 'FAIL'}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figure(out / f"live_{args.model}.png", args.model, every, saved, adaptive)
    results = {"model": args.model, "overhead": overhead, **{k: v for k, v in t.items() if k != "live_folder"},
               "screens_live": len(every), "screens_fixed_refine": refined["screens"],
               "brackets": {c: {"fixed_refine": describe(refined["brackets"].get(c)), "adaptive": describe(adaptive[c]),
                                "every_screen": describe(finest[c])} for c in classes}}
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"figure and results: {out}")
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
