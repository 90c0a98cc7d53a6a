"""Training time, sweep time and peak memory of the main job, from a fresh outputs folder.

    python benchmarks/bench_main_job.py [--models toy_neox,toy_olmo,toy_olmoe] [--keep DIR]

Phase 1 trains the toy models (what a first `python -m emergence` does before it
screens); phase 2 runs the main job itself on the trained checkpoints (screens,
MLflow logging, report). Each phase runs in a subprocess; peak memory is the largest
resident set of a phase's process. Budget (issue 3): the two phases together at most
10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TRAIN = """
import sys
from pathlib import Path
from emergence.catalog import load_model_config
from emergence.toy import ensure_trained
for name in sys.argv[2].split(","):
    cfg = load_model_config(name)
    ensure_trained(cfg.recipe, Path(sys.argv[1]), cfg.name, progress=False)
"""


# Runs a module as __main__ and writes its peak resident set (KB) to a file at exit.
PEAK = """
import atexit, resource, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))
sys.argv = sys.argv[1:]
if sys.argv[0].endswith(".py"):
    runpy.run_path(sys.argv[0], run_name="__main__")
else:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def timed(args, work: Path) -> tuple[float, float, str]:
    peak_file = work / "peak.txt"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PEAK, str(peak_file), *args], cwd=ROOT,
                          env=dict(os.environ, EMERGENCE_HOME=str(work)),  # Hydra logs, stats report: work/outputs
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(args)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return wall, int(peak_file.read_text()) / 1024, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="toy_neox",
                        help="the default job's model; toy_neox,toy_olmo,toy_olmoe for the three-family study")
    parser.add_argument("--keep", help="work folder to keep (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_main_"))
    toy_dir, store = work / "toy", work / "store"
    models = args.models.split(",")
    work.mkdir(parents=True, exist_ok=True)
    (work / "train_toy.py").write_text(TRAIN)
    train_s, train_mb, _ = timed([str(work / "train_toy.py"), str(toy_dir), args.models], work)
    job = ["emergence", f"cache.toy_dir={toy_dir}",
           f"tracking.uri=sqlite:///{store}/mlflow.db", f"tracking.artifacts={store}/artifacts"]
    if len(models) > 1:
        job += ["-m", f"model={args.models}"]
    else:
        job += [f"model={models[0]}"]
    sweep_s, sweep_mb, out = timed(job, work)
    print(out[out.find("==="):] if "===" in out else out[-4000:])
    print(f"models: {args.models}  (work folder {work})")
    print(f"{'phase':<10}{'wall s':>10}{'peak RSS MB':>14}")
    print(f"{'training':<10}{train_s:>10.1f}{train_mb:>14.0f}")
    print(f"{'sweep':<10}{sweep_s:>10.1f}{sweep_mb:>14.0f}")
    total = train_s + sweep_s
    print(f"total {total:.1f} s (budget 600 s on 2 cores): {'PASS' if total <= 600 else 'OVER'}")


if __name__ == "__main__":
    main()
