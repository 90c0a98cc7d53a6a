"""Speed of the statistics suite on a realistic per-head table, without figures.

    .venv/bin/python benchmarks/bench_stats_speed.py [--models 30] [--revisions 10] [--cores 2] [--jobs 0] [--profile N]

Builds a per-head table (source ``heads_csv``) of ``--models`` models x ``--revisions``
log-spaced revisions x about 330 heads each (layers x heads per layer of 24 x 14, 16 x 20 or
12 x 28: 30 x 10 x ~330 = about 100,000 rows) with a selectivity column for each of the 6
classes and a ``pr`` column. Per model and class a :class:`stats.simulate.HeadPopulation`
decides which heads are on: 0 to 30 % of the heads switch on at log-normal times (t50
anywhere from before the first revision to after the last, 10-90 width 0.05 to 3 decades),
a few flicker near the threshold and a few drop out; a head that is on has selectivity
threshold x exp(N(1, 0.5)), one that is off exp(N(0, 0.7)) (about 1x, a uniform head).
Then it times, with the default analysis config (``n_boot`` 1000, every stage: curves, gaps,
milestones, threshold sensitivity, findings, PR lead):

- reading the table (``read_heads_csv``),
- the analysis (``stats.analyse``), the criterion: under 60 s,
- writing the outputs without figures (``write_outputs(..., figures=False)``: summary.json,
  tables, report.md; ``python -m stats figures=false``).

The curves are analysed on ``--jobs`` processes (``analysis.n_jobs``, stats/parallel.py; 0, the
default: every core the benchmark may use, ``--cores``). The load average is printed before and
after: the cores may be shared, and a timing taken under load says so. The analysis's CPU time
(``time.process_time`` of this process, all its threads, plus the CPU time of its worker
processes, psutil) is what it costs; on idle cores the wall time is about that CPU time over
the processes. ``--profile N`` prints the N costliest functions (cProfile, cumulative; it
sees this process only: use it with ``--jobs 1``).
"""

import argparse
import os
import sys

CLASSES = ("induction", "previous_token", "duplicate_token", "bos", "self", "local")
SHAPES = ((24, 14), (16, 20), (12, 28))


def per_head_table(n_models: int, n_revisions: int, rng):
    """The simulated per-head table of the module docstring (a pandas DataFrame)."""
    import numpy as np
    import pandas as pd

    from emergence.common import head_classes
    from stats.simulate import HeadPopulation, logspaced_tokens

    thresholds = head_classes.default_thresholds()
    frames = []
    for m in range(n_models):
        layers, per_layer = SHAPES[m % len(SHAPES)]
        n_heads = layers * per_layer
        tok = logspaced_tokens(10 ** rng.uniform(8.5, 9.5), 10 ** rng.uniform(11.5, 12.7), n_revisions)
        x = np.log10(tok)
        cols = {}
        for c in CLASSES:
            n_switch = int(rng.integers(0, int(0.3 * n_heads) + 1))
            t50 = 10 ** rng.uniform(x[0] - 0.5, x[-1] + 0.5)
            spread = 10 ** rng.uniform(np.log10(0.05), np.log10(3.0)) / 2.563
            pop = HeadPopulation(n_heads, n_switch, t50, spread, n_flicker=int(rng.integers(0, 5)), flicker_p=0.3,
                                 dropout=float(rng.choice([0.0, 0.01, 0.05])))
            flags = pop.simulate(tok, rng).flags[:, rng.permutation(n_heads)]
            on = thresholds[c] * np.exp(rng.normal(1.0, 0.5, flags.shape))
            off = np.exp(rng.normal(0.0, 0.7, flags.shape))
            cols[f"selectivity.{c}"] = np.where(flags, on, off).ravel()
        head = np.tile(np.arange(n_heads), n_revisions)
        frames.append(pd.DataFrame({
            "model": f"model{m:02d}", "revision": np.repeat([f"step{int(t / 2e6)}" for t in tok], n_heads),
            "tokens": np.repeat(tok, n_heads), "layer": head // per_layer, "head": head % per_layer, **cols,
            "pr": rng.normal(20.0, 3.0, n_heads * n_revisions),
        }))
    return pd.concat(frames, ignore_index=True)


def cpu_time() -> float:
    """CPU seconds of this process and of its child processes still running (the analysis's workers)."""
    import time

    import psutil

    total = time.process_time()
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=30)
    ap.add_argument("--revisions", type=int, default=10)
    ap.add_argument("--n-boot", type=int, default=None, help="bootstrap replicates (default: the config's)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=0, help="analysis.n_jobs: processes for the curves (0: every core used)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=int, default=0, help="print the N costliest functions (cProfile)")
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.cores)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cores])

    import tempfile
    import time

    import numpy as np

    from stats import analyse
    from stats.config import AnalysisConfig
    from stats.parallel import workers
    from stats.report import write_outputs
    from stats.sources.heads_csv import read_heads_csv

    rng = np.random.default_rng(args.seed)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} ({args.cores} cores used, "
          f"{os.cpu_count()} on the machine)", flush=True)
    table = per_head_table(args.models, args.revisions, rng)
    cfg = AnalysisConfig(progress=False, seed=args.seed, n_jobs=args.jobs)
    if args.n_boot:
        cfg.n_boot = args.n_boot
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "heads.csv")
        table.to_csv(path, index=False)
        t0 = time.perf_counter()
        results = read_heads_csv(path)
        t_read = time.perf_counter() - t0
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        t0, c0 = time.perf_counter(), cpu_time()
        analysis = analyse(results, cfg)
        t_analysis, c_analysis = time.perf_counter() - t0, cpu_time() - c0
        if profiler is not None:
            import pstats

            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)
        t0 = time.perf_counter()
        write_outputs(analysis, os.path.join(tmp, "out"), figures=False)
        t_out = time.perf_counter() - t0
    curves = analysis.curves
    shapes = {}
    for c in curves:
        shapes[c.verdict.shape] = shapes.get(c.verdict.shape, 0) + 1
    print(f"per-head rows: {len(table)} ({args.models} models x {args.revisions} revisions x "
          f"{len(table) // (args.models * args.revisions)} heads on average), classes: {len(CLASSES)}, "
          f"curves: {len(curves)}, bootstrapped: {sum(c.boot is not None for c in curves)}, n_boot: {cfg.n_boot}")
    print(f"verdicts: {dict(sorted(shapes.items()))}")
    print(f"read the table: {t_read:.1f} s")
    jobs = workers(cfg.n_jobs, len(curves))
    print(f"analysis (no figures): {t_analysis:.1f} s wall ({t_analysis / len(curves):.3f} s a curve, "
          f"{jobs} processes on {args.cores} cores)  [{'PASS' if t_analysis < 60 else 'FAIL'}: "
          f"< 60 s]; CPU time {c_analysis:.1f} s (all processes; on idle cores the wall time is about "
          f"{c_analysis / max(1, min(jobs, args.cores)):.1f} s)")
    print(f"outputs without figures (summary.json, tables, report.md): {t_out:.1f} s")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if t_analysis < 60 else 1


if __name__ == "__main__":
    sys.exit(main())
