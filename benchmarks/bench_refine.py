"""Budget of adaptive revision refinement (issue 14, point 3): revisions screened to resolve
a transition to adjacent checkpoints, against screening the whole bracket.

Known revisions: OLMo-1B-0724's revision snapshot (emergence/snapshots/olmo_1b_0724.json, 1,454
revisions) or a synthetic list of ``--revisions`` evenly spaced checkpoints. Start: the
default 10 log-spaced revisions. Truth: a known switch revision; the head count is either a
step (every head switches there) or a population of ``--heads`` heads switching at their own
revisions, drawn log-normally around the switch (``--spread`` decades), which stay on.

    python benchmarks/bench_refine.py [--per-round 1 2 4] [--spread 0.05] [--trials 200]

Prints, per scenario and ``per_round``: the bracket size B after the 10 log-spaced revisions
(known revisions inside it), log2 B, the revisions refinement screened (mean and max over
switch positions) and the rounds, and how often the final bracket holds the switch (step) or
the largest one-interval jump (population).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emergence.refine_rule import simulate  # noqa: E402
from emergence.revisions import Revision, logspaced, read_revision_file  # noqa: E402
from emergence.sources.snapshot import snapshot_path  # noqa: E402


def registries(n: int):
    olmo = read_revision_file(snapshot_path("olmo_1b_0724"))
    even = [Revision(i * 2 * 10**9, i * 1000, f"step{i * 1000}") for i in range(1, n + 1)]
    return {"olmo_1b_0724 snapshot": olmo, f"even {n}": even}


def run(known, per_round: int, trials: int, heads: int, spread: float, rng) -> dict:
    start = logspaced(known, 10)
    lo, hi = known.index(start[0]), known.index(start[-1])
    switches = rng.integers(lo + 1, hi, size=trials)
    out = {"B": [], "screened": [], "rounds": [], "exact": 0}
    for s in switches:
        switch = known[int(s)]
        if heads == 0:
            def count(cls, r, switch=switch):
                return float(r.tokens >= switch.tokens)
        else:
            on = np.log10(switch.tokens) + spread * rng.standard_normal(heads)

            def count(cls, r, on=on):
                return float((np.log10(max(r.tokens, 1)) >= on).sum())
        plans = simulate(known, start, count, ["c"], per_round=per_round, rounds=60)
        first, last = plans[0].brackets["c"], plans[-1].brackets["c"]
        if first is None:
            continue
        out["B"].append(first.inside)
        out["screened"].append(sum(len(p.revisions) for p in plans))
        out["rounds"].append(sum(1 for p in plans if p.revisions))
        if heads == 0:
            out["exact"] += int(last.resolved and last.hi == switch)
        else:
            out["exact"] += int(last.resolved)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-round", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--revisions", type=int, default=1400, help="size of the synthetic even list of known revisions")
    p.add_argument("--heads", type=int, default=16, help="heads of the population scenario")
    p.add_argument("--spread", type=float, default=0.05, help="sd of the heads' switch, in decades of tokens")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    print(f"{'known':<24}{'truth':<16}{'per_round':>9}{'B mean':>8}{'log2 B':>8}{'screened':>10}"
          f"{'max':>5}{'rounds':>8}{'resolved':>10}{'vs whole bracket':>18}")
    for name, reg in registries(a.revisions).items():
        for truth, heads in (("step", 0), (f"{a.heads} heads", a.heads)):
            for per_round in a.per_round:
                r = run(reg, per_round, a.trials, heads, a.spread, rng)
                n = len(r["B"])
                B = float(np.mean(r["B"]))
                screened = float(np.mean(r["screened"]))
                print(f"{name:<24}{truth:<16}{per_round:>9}{B:>8.1f}{math.log2(B):>8.2f}{screened:>10.2f}"
                      f"{max(r['screened']):>5}{np.mean(r['rounds']):>8.2f}{r['exact'] / n:>10.1%}"
                      f"{B / screened:>17.1f}x")
    print("screened: revisions added by refinement (mean over random switch revisions); "
          "resolved: final bracket between adjacent known revisions (step: and holding the switch)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
