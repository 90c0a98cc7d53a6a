"""Operating characteristic of the shape verdict (sharp / gradual / none).

    .venv/bin/python benchmarks/bench_shape_oc.py [--datasets 200] [--n-boot 300] [--seed 0]
    .venv/bin/python benchmarks/bench_shape_oc.py --space-only [--studies 400] [--thinned]

Every curve goes through :func:`stats.curve_analysis.analyse_curve`, exactly as the
analysis runs it (``--n-boot`` sets its bootstrap replicates, which give the times'
intervals and the width's interval that the verdict reads; fewer than about 300 under-cover:
on the sampled space's 400 studies, t50 coverage 0.896 with 20, 0.921 with 300). Revisions:
10, log-spaced from 1e9 to 3e12 tokens (0.386 decades apart); t50 drawn uniformly
(in log10 tokens) between the 3rd and 8th revisions, so its position inside a
checkpoint interval is random. Widths are 10-90 widths in units of the spacing.

Sections (``--datasets`` curves per row):

A. Logistic curves, fresh binomial draws at every revision (128 heads, floor
   U(0, 0.05), ceiling U(0.4, 0.8)): share of sharp / gradual / none by width, the
   mean true largest share of the rise in one interval (of the true curve between
   the first and last revision), and the agreement of the verdict with the truth
   (sharp iff that true share >= 0.5) among curves not called none.
B. Head populations (:class:`stats.simulate.HeadPopulation`, 256 heads followed
   across revisions): U(60, 200) heads switch on at log-normal times and stay on,
   4 heads flicker (on with probability 0.5 at each revision), a switched-on head
   reads off at a revision with probability 0.01. By the 10-90 width of the
   switch-on times: share of sharp / gradual / none, the mean true largest share
   of switching heads in one interval, and the agreement of the verdict with the
   truth (sharp iff that true share >= 0.5) among curves not called none.
C. The ``none`` rule: false-positive rate (a transition called) on flat curves, and
   the detection rate (not none) of small circuits that switch on and stay. The
   old rule's criterion (the constant model within 2 AICc of the best) on the same
   flat curves is printed for comparison.
D. Both regimes on the named families of :data:`stats.simulate.FAMILIES`, at 10
   and 20 log-spaced revisions: per family, the share of curves whose verdict is
   right (the true shape; ``none`` for a censored truth, whose rise lies outside
   the range), whose censoring flag is right (flat truths have no side and are not
   scored), and for the rise-then-decline families the share with the decline
   found; per regime, the shape accuracy over all its families (criterion: >= 0.90).
   Widths in D are chosen away from the borderline (sharp: 10-90 width 0.1-0.5
   spacings; gradual: 3-5 spacings); sections A and B show the borderline.
E. The sampled space (:mod:`stats.study_space`): ``--studies`` whole studies drawn at
   random (grid kind log / linear / Pythia-like with a step 0, 5-150 revisions, the
   transition anywhere from before the first revision to after the last, 3-400
   switching heads of 64-1024, flicker, dropout, declines, identity and aggregate,
   10-90 widths 0.02-3 decades), every one analysed as the analysis runs it. Over the
   whole space and by factor (grid, revisions, position, switching heads, regime, true
   width against C = ``analysis.shape.sharp_width_decades``): shape accuracy (the
   verdict is the truth's: ``none`` for a censored truth, its true shape or ``unresolved``
   besides where part of its rise lies inside the range; ``unresolved`` or either shape
   for a borderline truth or a rise inside one interval wider than C; ``unresolved`` on a
   resolvable truth is wrong), the same over resolvable truths inside the range, the
   censoring side, detection of change (not ``none``, t50 inside the range), false
   changes (not ``none``) on flat curves, and the t50 coverage where a t50 is reported; ``claims right``: the share of the verdicts
   ``sharp`` and ``gradual`` that are right (a wrong claim, not an abstention). ``none`` is also right for a rise in the last
   interval (seen at the last revision alone) and for a change the noise hides (oracle z <
   4, :func:`stats.study_space.oracle_z`). Criteria: shape accuracy >= 0.90 over the space
   and over the detectable changes; t50 coverage >= 0.90; false changes <= 0.05 (the nominal
   level, within two binomial standard errors).
F. ``--thinned``: the same studies of 10 revisions or more read on every other revision and
   on all of them; the verdicts' cross table and the count of sharp <-> gradual flips
   (criterion: none; refining may resolve a verdict or add doubt).
"""

import argparse
import sys
import time

import numpy as np

SPACINGS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", type=int, default=200)
    ap.add_argument("--n-boot", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families-only", action="store_true", help="only section D (the two regimes on the families)")
    ap.add_argument("--space-only", action="store_true", help="only section E (the sampled space)")
    ap.add_argument("--studies", type=int, default=400, help="studies drawn from the space (section E)")
    ap.add_argument("--thinned", action="store_true",
                    help="with --space-only: also read each study on every other revision (section F)")
    args = ap.parse_args()
    D = args.datasets
    if args.space_only:
        t_start = time.perf_counter()
        failed = space_section(args.studies, args.n_boot, np.random.default_rng(args.seed))
        if args.thinned:
            failed += thinned_section(args.studies, args.n_boot, np.random.default_rng(args.seed))
        print(f"done in {time.perf_counter() - t_start:.0f} s" + (f": {failed} criteria fail" if failed else ": criteria pass"))
        return 1 if failed else 0

    from tqdm import tqdm

    from stats.curve_analysis import analyse_curve
    from stats.config import AnalysisConfig
    from stats.tracked import Curve
    from stats.simulate import (NORMAL_WIDTH_PER_SD, HeadPopulation, logistic_probability, logspaced_tokens,
                                simulate_counts_once)

    rng = np.random.default_rng(args.seed)
    cfg = AnalysisConfig(n_boot=args.n_boot, progress=False)
    tok = logspaced_tokens(1e9, 3e12, 10)
    x = np.log10(tok)
    spacing = float(x[1] - x[0])
    revs = np.array([f"r{i}" for i in range(len(tok))])

    def verdict(k, n, flags=None):
        """The verdict of counts ``k`` of ``n``: a head population (``flags`` given) in the identity
        regime, fresh draws in the aggregate one."""
        n = np.broadcast_to(np.asarray(n, float), tok.shape).copy()
        c = Curve("sim", "bos", revs, tok, np.asarray(k, float), n, identity=flags is not None, flags=flags)
        return analyse_curve(c, cfg, rng).verdict

    def t50():
        return 10 ** rng.uniform(x[2], x[7])

    t_start = time.perf_counter()
    print(f"shape verdict operating characteristic: {D} curves a row, 10 revisions {spacing:.3f} decades apart, "
          f"n_boot {args.n_boot}")

    if args.families_only:
        failed = families_section(D, args.n_boot, rng)
        print(f"done in {time.perf_counter() - t_start:.0f} s" + (f": {failed} criteria fail" if failed else ": criteria pass"))
        return 1 if failed else 0

    print("\nA. logistic curves, fresh binomial draws, 128 heads")
    print(f"  {'10-90 width (spacings)':<24} {'sharp':>6} {'gradual':>8} {'none':>6} {'true share':>11} {'agrees':>7}")
    n128 = np.full(10, 128)
    for w in SPACINGS:
        shapes, truth_share, agree, called = [], [], 0, 0
        for _ in tqdm(range(D), desc=f"logistic w={w}", leave=False):
            p = logistic_probability(tok, rng.uniform(0, 0.05), rng.uniform(0.4, 0.8), t50(), w * spacing)
            s = verdict(simulate_counts_once(p, n128, rng), n128).shape
            true = float(np.diff(p).max() / (p[-1] - p[0]))  # the true curve's largest share of its rise
            shapes.append(s)
            truth_share.append(true)
            if s != "none":
                called += 1
                agree += (s == "sharp") == (true >= 0.5)
        print(f"  {w:<24} {shapes.count('sharp') / D:6.3f} {shapes.count('gradual') / D:8.3f} {shapes.count('none') / D:6.3f} "
              f"{np.mean(truth_share):11.3f} {agree / max(called, 1):7.3f}", flush=True)

    print("\nB. head populations, 256 heads followed across revisions, 4 flickering, dropout 0.01")
    print(f"  {'10-90 width (spacings)':<24} {'sharp':>6} {'gradual':>8} {'none':>6} {'true share':>11} {'agrees':>7}")
    for w in SPACINGS:
        shapes, truth_share, agree, called = [], [], 0, 0
        for _ in tqdm(range(D), desc=f"population w={w}", leave=False):
            pop = HeadPopulation(256, int(rng.integers(60, 201)), t50(), w * spacing / NORMAL_WIDTH_PER_SD,
                                 n_flicker=4, dropout=0.01).simulate(tok, rng)
            s = verdict(pop.k, pop.n, pop.flags).shape
            true = pop.truth()["max_share"]
            shapes.append(s)
            truth_share.append(true)
            if s != "none":
                called += 1
                agree += (s == "sharp") == (true >= 0.5)
        print(f"  {w:<24} {shapes.count('sharp') / D:6.3f} {shapes.count('gradual') / D:8.3f} {shapes.count('none') / D:6.3f} "
              f"{np.mean(truth_share):11.3f} {agree / max(called, 1):7.3f}", flush=True)

    print("\nC. the none rule")
    n256 = np.full(10, 256)

    def rates(draw, label):
        called, old = 0, 0
        for _ in tqdm(range(D), desc=label, leave=False):
            v = verdict(*draw())
            called += v.shape != "none"
            dc = (v.evidence.get("delta_aicc") or {}).get("constant", 0.0)
            old += dc > 2.0 and v.evidence.get("rise", 0.0) >= 0.02
        return called / D, old / D

    def flat_pop(n_always_hi, n_flicker, p):
        def draw():
            pop = HeadPopulation(256, 0, 1e11, 0.1, n_always=int(rng.integers(0, n_always_hi + 1)), n_flicker=n_flicker,
                                 flicker_p=p).simulate(tok, rng)
            return pop.k, pop.n, pop.flags
        return draw

    flat = [
        ("flat, binomial draws, 128 heads, p ~ U(0, 0.3)",
         lambda: (simulate_counts_once(np.full(10, rng.uniform(0, 0.3)), n128, rng), n128)),
        ("flat, beta-binomial phi = 4, 256 heads",
         lambda: (simulate_counts_once(np.full(10, rng.uniform(0.02, 0.3)), n256, rng, 4.0), n256)),
        ("flat population: U(0, 60) on + 4 flickering (p 0.5)", flat_pop(60, 4, 0.5)),
        ("flat population: 3 heads flickering (p 0.3), none on", flat_pop(0, 3, 0.3)),
    ]
    print(f"  {'flat curves':<56} {'transition called':>18} {'old rule (AICc)':>16}")
    for label, draw in flat:
        new, old = rates(draw, label[:20])
        print(f"  {label:<56} {new:18.3f} {old:16.3f}", flush=True)

    def circuit(n_heads, n_switch, n_flicker, dropout, lo=1, hi=7):
        def draw():
            pop = HeadPopulation(n_heads, n_switch, 10 ** rng.uniform(x[lo], x[hi]), 0.05, n_flicker=n_flicker,
                                 flicker_p=0.2, dropout=dropout).simulate(tok, rng)
            return pop.k, pop.n, pop.flags
        return draw

    small = [
        ("3 of 256 switch on (t50 between revisions 2 and 8)", circuit(256, 3, 0, 0.0)),
        ("3 of 256, dropout 0.05, 2 heads flickering (p 0.2)", circuit(256, 3, 2, 0.05)),
        ("3 of 256, dropout 0.05, 2 flickering, t50 in revs 2-9", circuit(256, 3, 2, 0.05, 1, 8)),
        ("5 of 128, dropout 0.05, 2 heads flickering (p 0.2)", circuit(128, 5, 2, 0.05)),
    ]
    print(f"  {'small circuits':<56} {'detected':>18} {'old rule (AICc)':>16}")
    for label, draw in small:
        new, old = rates(draw, label[:20])
        print(f"  {label:<56} {new:18.3f} {old:16.3f}", flush=True)
    failed = families_section(D, args.n_boot, rng) + space_section(args.studies, args.n_boot, rng)
    print(f"done in {time.perf_counter() - t_start:.0f} s" + (f": {failed} criteria fail" if failed else ": criteria pass"))
    return 1 if failed else 0


def space_section(n: int, n_boot: int, rng) -> int:
    """Section E (module docstring); returns the number of failed criteria."""
    from stats.config import AnalysisConfig
    from stats.space_scores import criterion_of, errors, factor_table, study_records

    cfg = AnalysisConfig(n_boot=n_boot, progress=False)
    print(f"\nE. the sampled space: {n} studies drawn at random (stats/study_space.py), C = {criterion_of(cfg)} decades")
    records = study_records(n, cfg, rng, progress=True)
    columns = {
        "shape accuracy": ("shape", lambda r: not r["flat"]),
        "resolvable inside": ("shape", lambda r: r["inside"] and r["resolvable"]),
        "claims right": ("shape", lambda r: r["verdict"] in ("sharp", "gradual")),
        "censoring right": ("censored", None),
        "change detected": ("changed", lambda r: r["inside"]),
        "false change (flat)": ("changed", lambda r: r["flat"]),
        "t50 coverage": ("covers", None),
    }
    for line in factor_table(records, columns):
        print(line, flush=True)
    for error, count in errors(records):
        print(f"  analysis raised on {count} studies (counted as wrong): {error}")
    return report_criteria(records)


def thinned_section(n: int, n_boot: int, rng) -> int:
    """Section F: the sampled studies of 10 revisions or more read on every other revision and on
    all of them (:func:`stats.space_scores.thinned_verdicts`); fails where any verdict flips between
    sharp and gradual."""
    from stats.config import AnalysisConfig
    from stats.space_scores import thinned_verdicts

    pairs = thinned_verdicts(n, AnalysisConfig(n_boot=n_boot, progress=False), rng, progress=True)
    print(f"\nF. the same studies (10 revisions or more, not flat: {sum(pairs.values())}) on every other revision "
          "-> on all of them")
    for (coarse, fine), count in sorted(pairs.items()):
        print(f"  {coarse:>10} -> {fine:<10} {count}")
    flips = sum(c for (a, b), c in pairs.items() if {a, b} == {"sharp", "gradual"})
    print(f"  {'sharp <-> gradual when checkpoints are added':<45} {flips:6d}  [0] {'PASS' if flips == 0 else 'FAIL'}",
          flush=True)
    return int(flips > 0)


def report_criteria(records) -> int:
    """The criteria of section E over the whole space; the number that fail."""
    from stats.space_scores import rate

    failed = 0
    acc, n_acc = rate(records, "shape", lambda r: not r["flat"])
    det, n_det = rate(records, "shape", lambda r: r["detectable"] == "yes")
    false, n_flat = rate(records, "changed", lambda r: r["flat"])
    cover, n_cover = rate(records, "covers", None)
    limit = 0.05 + 2 * np.sqrt(0.05 * 0.95 / max(n_flat, 1))
    for label, value, count, ok, target in (("shape accuracy over the space", acc, n_acc, acc >= 0.90, ">= 0.90"),
                                            ("shape accuracy, detectable changes", det, n_det, det >= 0.90, ">= 0.90"),
                                            ("t50 coverage where a t50 is reported", cover, n_cover, cover >= 0.90,
                                             ">= 0.90"),
                                            ("false changes on flat curves", false, n_flat, false <= limit,
                                             f"<= 0.05 (+2 SE: {limit:.3f})")):
        failed += not ok
        print(f"  {label:<45} {value:6.3f} ({count})  [{target}] {'PASS' if ok else 'FAIL'}", flush=True)
    return failed


def families_section(D: int, n_boot: int, rng) -> int:
    """Section D (module docstring); returns the number of failed criteria."""
    from tqdm import tqdm

    from stats.curve_analysis import analyse_curve
    from stats.config import AnalysisConfig
    from stats.simulate import FAMILIES, family, logspaced_tokens, score

    cfg = AnalysisConfig(n_boot=n_boot, progress=False)
    print("\nD. the two regimes on the simulated families (aggregate: independent draws; population: followed heads)")
    print(f"  {'family':<34} {'revisions':>9} {'verdict right':>14} {'censoring right':>16} {'decline found':>14}")
    failed = 0
    for regime in ("aggregate", "population"):
        right = total = 0
        for m in (10, 20):
            tok = logspaced_tokens(1e9, 3e12, m)
            for name in [f for f in FAMILIES if f.startswith(regime)]:
                shape, cens, decline = [], [], []
                for _ in tqdm(range(D), desc=f"{name} m={m}", leave=False):
                    sim = family(name, tok, rng)
                    ca = analyse_curve(sim.curve(), cfg, rng)
                    sc = score(ca, sim.truth)
                    shape.append(sc["shape"])
                    if sc["censored"] is not None:
                        cens.append(sc["censored"])
                    if sim.truth.decline:
                        decline.append(ca.phases is not None and ca.phases.decline is not None)
                right += sum(shape)
                total += len(shape)
                c = f"{np.mean(cens):16.3f}" if cens else f"{'-':>16}"
                dl = f"{np.mean(decline):14.3f}" if decline else f"{'-':>14}"
                print(f"  {name:<34} {m:>9} {np.mean(shape):14.3f} {c} {dl}", flush=True)
        acc = right / total
        ok = acc >= 0.90
        failed += not ok
        print(f"  {regime + ': shape accuracy over its families':<45} {acc:14.3f}  [>= 0.90] {'PASS' if ok else 'FAIL'}",
              flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
