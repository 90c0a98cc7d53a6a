"""Pooling across seeds (stats/pooling.py): coverage of the pooled interval and size of the
pooled separation test on simulated groups of runs with a known pooled ratio and tau.

Two levels:

- ``effects``: each run's log10 gap ``y_i = theta_i + e_i``, ``theta_i ~ N(log10 R, tau^2)``,
  ``e_i ~ N(0, v_i)`` with within-run SDs ``U(0.05, 0.25)`` decades (the range the toy and the
  simulated curves give); with ``--censor`` each run's early transition lies ``U(-0.5, 1.5)``
  decades after the first revision, so a quarter of the runs see it before the first
  revision and give a lower bound (the gap against the first revision) instead of a point;
- ``curves``: whole runs, an induction and a BOS curve each (stats.simulate.seed_group:
  aggregate logistic draws on 128 heads, or populations of 256 heads), analysed by
  stats.curve_analysis.analyse_curve and pooled as ``python -m stats`` pools them.

Printed per row: the share of groups whose pooled interval holds log10 R (criterion >= 0.9
at 5 seeds), whose prediction interval holds a new run's theta, the rejection rate of the
one-sided pooled separation test at alpha = 0.05 (its size where R = 1: criterion <= 0.08,
the calibration benchmark's band; its power elsewhere), the median I^2 and the median
tau^2 estimate.

    python benchmarks/bench_pooling.py                      # effects level, 2000 groups a row
    python benchmarks/bench_pooling.py --level curves --groups 100 --n-boot 200
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from stats.pooling import Effect, meta_analysis

ALPHA = 0.05
SCENARIOS = [(1.0, 0.0), (1.0, 0.1), (1.0, 0.3), (3.0, 0.0), (3.0, 0.15), (3.0, 0.3)]


def effects_group(rng, k, ratio, tau, censor: bool):
    mu = np.log10(ratio)
    theta = mu + tau * rng.standard_normal(k)
    sd = rng.uniform(0.05, 0.25, k)
    y = theta + sd * rng.standard_normal(k)
    out = []
    for i in range(k):
        early = rng.uniform(-0.5, 1.5) if censor else 1.0
        if early < 0:  # the early class formed before the first revision: ratio >= late / t_1
            out.append(Effect(f"r{i}", float(y[i] + early), float(sd[i] ** 2), "lower"))
        else:
            out.append(Effect(f"r{i}", float(y[i]), float(sd[i] ** 2)))
    return out


def curves_group(rng, k, ratio, tau, regime, n_boot, tokens):
    from stats.curve_analysis import analyse_curve
    from stats.gaps import fitted_gap
    from stats.config import AnalysisConfig
    from stats.pooling import gap_effect
    from stats.simulate import seed_group

    cfg = AnalysisConfig(n_boot=n_boot, progress=False)
    cfg.shape.n_perm = 199
    out = []
    for i, (early, late, _) in enumerate(seed_group(regime, tokens, ratio, tau, k, rng)):
        ea = analyse_curve(early.curve(f"r{i}", "induction"), cfg, rng)
        la = analyse_curve(late.curve(f"r{i}", "bos"), cfg, rng)
        effect, _ = gap_effect(f"r{i}", fitted_gap(f"r{i}", la, ea, cfg), la, ea)
        if effect is not None:
            out.append(effect)
    return out


def covers(ci, value) -> bool:
    lo, hi = ci
    return (lo is None or lo <= value) and (hi is None or value <= hi)


def run_row(make, groups, ratio, tau, rng) -> dict:
    hits, pi_hits, pi_n, rejects, n, i2, tau2 = 0, 0, 0, 0, 0, [], []
    mu = np.log10(ratio)
    for _ in range(groups):
        fit = meta_analysis(make())
        if fit is None:
            continue
        n += 1
        hits += covers(fit.ci, mu)
        rejects += fit.p_value <= ALPHA
        if fit.prediction_interval[0] is not None or fit.prediction_interval[1] is not None:
            pi_n += 1
            pi_hits += covers(fit.prediction_interval, mu + tau * rng.standard_normal())
        i2.append(fit.i2)
        tau2.append(fit.tau2)
    return {"n": n, "coverage": hits / max(n, 1), "pi_coverage": pi_hits / max(pi_n, 1),
            "reject": rejects / max(n, 1), "i2": float(np.median(i2)) if i2 else float("nan"),
            "tau2": float(np.median(tau2)) if tau2 else float("nan")}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--level", choices=("effects", "curves"), default="effects")
    parser.add_argument("--groups", type=int, default=None, help="groups a row (effects 2000, curves 100)")
    parser.add_argument("--seeds", default="3,5,10", help="runs a group, comma-separated (curves: 5)")
    parser.add_argument("--censor", action="store_true", help="effects level: a quarter of the runs are lower bounds")
    parser.add_argument("--regime", choices=("aggregate", "population"), default="aggregate")
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    groups = args.groups or (2000 if args.level == "effects" else 100)
    seeds = [int(s) for s in args.seeds.split(",")] if args.level == "effects" else [5]
    tic = time.time()
    what = (f"effects{' with censored runs' if args.censor else ''}" if args.level == "effects"
            else f"curves ({args.regime}, n_boot {args.n_boot})")
    print(f"pooled gap, {what}: {groups} groups a row, alpha {ALPHA}, load {os.getloadavg()[0]:.1f}")
    print(f"{'seeds':>5} {'ratio':>6} {'tau':>5} {'groups':>7} {'CI cover':>9} {'PI cover':>9} {'reject':>7} "
          f"{'I2 med':>7} {'tau2 med':>9}")
    from stats.simulate import logspaced_tokens

    tokens = logspaced_tokens()
    for k in seeds:
        for ratio, tau in SCENARIOS:
            def make(k=k, ratio=ratio, tau=tau):
                if args.level == "effects":
                    return effects_group(rng, k, ratio, tau, args.censor)
                return curves_group(rng, k, ratio, tau, args.regime, args.n_boot, tokens)

            r = run_row(make, groups, ratio, tau, rng)
            kind = "size" if ratio == 1 else "power"
            print(f"{k:>5} {ratio:>6g} {tau:>5g} {r['n']:>7} {r['coverage']:>9.3f} {r['pi_coverage']:>9.3f} "
                  f"{r['reject']:>7.3f} {r['i2']:>7.2f} {r['tau2']:>9.4f}   ({kind})")
    print(f"criteria: CI cover >= 0.90 at 5 seeds; reject <= 0.08 where ratio = 1 (size). "
          f"{time.time() - tic:.0f} s")


if __name__ == "__main__":
    main()
