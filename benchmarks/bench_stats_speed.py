"""Speed of the statistics suite: 3 models x 10 revisions x 6 classes, 1000 bootstrap
replicates each (every curve changes, so every curve is bootstrapped), on 2 cores.

    .venv/bin/python benchmarks/bench_stats_speed.py [--n-boot 1000] [--cores 2]

Prints the analysis time (fits, change points, bootstraps, tests, gaps, findings) and
the time to write the outputs (figures, tables, report), and whether the analysis
is under 60 s.
"""

import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.cores)
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))[: args.cores]
        os.sched_setaffinity(0, cpus)

    import tempfile
    import time

    import numpy as np
    import pandas as pd

    from stats import analyse, read_csv
    from stats.config import AnalysisConfig
    from stats.report import write_outputs
    from stats.simulate import curves_frame, logistic_probability, logspaced_tokens, simulate_counts_once, step_probability

    rng = np.random.default_rng(args.seed)
    classes = ("induction", "previous_token", "duplicate_token", "bos", "self", "local")
    frames = []
    for m in range(3):
        tok = logspaced_tokens(10 ** rng.uniform(8.5, 9.5), 10 ** rng.uniform(12, 12.7), 10)
        n = 128 if m == 0 else 256
        for i, c in enumerate(classes):
            if i % 3 == 0:
                p = step_probability(tok, rng.uniform(0, 0.05), rng.uniform(0.3, 0.7), int(rng.integers(2, 7)))
            else:
                p = logistic_probability(tok, rng.uniform(0, 0.05), rng.uniform(0.2, 0.7), 10 ** rng.uniform(10, 11.5),
                                         rng.uniform(0.3, 2.5))
            frames.append(curves_frame(f"model{m}", c, tok, simulate_counts_once(p, n, rng), n))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "curves.csv")
        pd.concat(frames).to_csv(path, index=False)
        results = read_csv(path)
        cfg = AnalysisConfig(n_boot=args.n_boot, progress=False, seed=args.seed)
        t0 = time.perf_counter()
        analysis = analyse(results, cfg)
        t_analysis = time.perf_counter() - t0
        boot = sum(c.boot is not None for c in analysis.curves)
        t0 = time.perf_counter()
        write_outputs(analysis, os.path.join(tmp, "out"))
        t_out = time.perf_counter() - t0
    shapes = pd.Series([c.verdict.shape for c in analysis.curves]).value_counts().to_dict()
    print(f"curves: {len(analysis.curves)} (3 models x 6 classes x 10 revisions), bootstrapped: {boot}, "
          f"replicates per bootstrap: {args.n_boot}, cores: {args.cores}")
    print(f"shapes: {shapes}")
    print(f"analysis time: {t_analysis:.1f} s ({t_analysis / len(analysis.curves):.2f} s a curve)  "
          f"[{'PASS' if t_analysis < 60 else 'FAIL'}: < 60 s]")
    print(f"outputs (figures, tables, report) time: {t_out:.1f} s")
    return 0 if t_analysis < 60 else 1


if __name__ == "__main__":
    sys.exit(main())
