"""Toy-suite training time per family, then the main job's sweep time, with peak memory.

    python benchmarks/bench_toy_training.py [--recipes neox,olmo,olmoe] [--no-sweep] [--keep DIR]

Phase 1 trains each shipped recipe (``conf/recipe/<name>.yaml``) from scratch into a
fresh cache, each in its own subprocess: wall time, training steps a second, peak
resident set, final training loss, size on disk. Phase 2 runs the main job
(``python -m emergence``, its defaults: every screen, 10 log-spaced revisions,
MLflow logging) on the trained suite, one subprocess per family: wall time and
peak resident set. Nothing is written under ``outputs/``.

Budget (issue 3): training and screening the toy suite at most 10 minutes on
2 cores; each family's training about 150 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL_OF = {"neox": "toy_neox", "olmo": "toy_olmo", "olmoe": "toy_olmoe"}

TRAIN = r"""
import json, resource, sys, time
from omegaconf import OmegaConf
from emergence.toy import as_recipe, ensure_trained
recipe = as_recipe(OmegaConf.load(sys.argv[1]))
start = time.perf_counter()
folder = ensure_trained(recipe, sys.argv[2], sys.argv[3], progress=False)
wall = time.perf_counter() - start
print(json.dumps({"folder": str(folder), "wall_s": wall, "steps": recipe.steps,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

# Runs ``python -m emergence ...`` in-process and reports its peak resident set.
JOB = r"""
import atexit, resource, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
sys.argv = ["emergence", *sys.argv[1:]]
runpy.run_module("emergence", run_name="__main__", alter_sys=True)
"""


def du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2 ** 20


def train(recipe: str, toy_dir: Path) -> dict:
    path = ROOT / "conf" / "recipe" / f"{recipe}.yaml"
    proc = subprocess.run([sys.executable, "-c", TRAIN, str(path), str(toy_dir), MODEL_OF.get(recipe, recipe)],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"training {recipe} failed:\n{proc.stderr[-3000:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    folder = Path(row["folder"])
    info = json.loads((folder / "revisions.json").read_text())
    row.update(recipe=recipe, family=info["recipe"]["family"], revisions=len(info["revisions"]),
               final_loss=info["train"]["final_loss"], disk_mb=du_mb(folder),
               steps_per_s=row["steps"] / row["wall_s"])
    return row


def sweep(model: str, toy_dir: Path, work: Path) -> dict:
    store = work / "store"
    peak = work / f"peak-{model}.txt"
    args = [f"model={model}", f"cache.toy_dir={toy_dir}", f"tracking.uri=sqlite:///{store}/mlflow.db",
            f"tracking.artifacts={store}/artifacts", f"hydra.run.dir={work}/hydra/{model}"]
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", JOB, str(peak), *args], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, EMERGENCE_HOME=str(work)))  # the stats report: work/outputs
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"model": model, "wall_s": wall, "peak_mb": float("nan"), "error": proc.stderr[-1500:],
                "table": ""}
    return {"model": model, "wall_s": wall, "peak_mb": float(peak.read_text()), "table": proc.stdout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", default="neox,olmo,olmoe")
    parser.add_argument("--no-sweep", action="store_true", help="time the training only")
    parser.add_argument("--keep", help="work folder to keep (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_toy_"))
    work.mkdir(parents=True, exist_ok=True)
    toy_dir = work / "toy"

    import os

    print(f"work folder {work}; {os.cpu_count()} CPU(s)")
    rows = [train(r, toy_dir) for r in args.recipes.split(",")]
    print(f"\n{'recipe':<10}{'family':<10}{'steps':>7}{'train s':>9}{'steps/s':>9}{'peak MB':>9}"
          f"{'revs':>6}{'disk MB':>9}{'loss':>7}")
    for r in rows:
        print(f"{r['recipe']:<10}{r['family']:<10}{r['steps']:>7}{r['wall_s']:>9.1f}{r['steps_per_s']:>9.1f}"
              f"{r['peak_mb']:>9.0f}{r['revisions']:>6}{r['disk_mb']:>9.1f}{r['final_loss']:>7.3f}")
    total_train = sum(r["wall_s"] for r in rows)
    print(f"training total {total_train:.1f} s")
    if args.no_sweep:
        return
    sweeps = [sweep(MODEL_OF.get(r["recipe"], r["recipe"]), toy_dir, work) for r in rows]
    for s in sweeps:
        print(s["table"] if not s.get("error") else f"{s['model']}: main job failed:\n{s['error']}")
    print(f"{'model':<12}{'sweep s':>9}{'peak MB':>9}")
    for s in sweeps:
        print(f"{s['model']:<12}{s['wall_s']:>9.1f}{s['peak_mb']:>9.0f}")
    total = total_train + sum(s["wall_s"] for s in sweeps)
    print(f"training + sweep {total:.1f} s (budget 600 s on 2 cores): {'PASS' if total <= 600 else 'OVER'}")


if __name__ == "__main__":
    main()
