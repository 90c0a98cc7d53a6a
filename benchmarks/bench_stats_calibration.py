"""Calibration of the statistics suite by simulation under each test's null, in both regimes.

    .venv/bin/python benchmarks/bench_stats_calibration.py [--datasets 200] [--n-boot 300] [--seed 0]

For every test, ``--datasets`` data sets are simulated under its null and the test
is run exactly as the analysis runs it; the rejection rate at alpha = 0.05 must lie
in [0.02, 0.08] (or below 0.08 where the null is composite and the test
conservative). Intervals must cover at least 0.90 (nominal 0.95). Informational
rows (not criteria) show behaviour inside a null and other rates.

The two regimes of the verdict rule (stats/shape.py) are calibrated separately on
the simulated families of :data:`stats.simulate.FAMILIES`: ``aggregate`` (fresh
binomial draws at every revision, no head identity, as ``source=csv``) and
``population`` (the same heads followed across revisions, as a per-head table),
each at 10 and 20 log-spaced revisions from 1e9 to 3e12 tokens:

- t50 coverage of every family with its midpoint inside the range (sharp and
  gradual logistics, ramps, steps, unequal n per revision, rise then partial
  decline, a 3-of-256-head circuit), and for the censored families the share of
  curves whose reported bound holds (t50 <= t_1, or > t_m, on the true side);
- separation power at a 5x gap with 10 revisions and the false-separation rate at
  ratio 1 (the boundary of H0), with :func:`stats.simulate.gap_pair`; and the
  one-sided test of a gap whose early class formed before the first revision;
- the decline test (stats/phases.py) on curves that only rise: false declines.

The sampled space (:mod:`stats.study_space`; ``--space-only`` runs this part alone):
``--studies`` whole studies drawn at random (grid kind log / linear / Pythia-like with a
step 0, 5-150 revisions, the transition anywhere from before the first revision to after
the last, 3-400 switching heads of 64-1024, flicker, dropout, declines, identity and
aggregate, 10-90 widths 0.02-3 decades): t50 coverage (the 95 % interval holds the true
t50; for a censored truth the bound holds), over the whole space and by factor (grid,
revisions, position, switching heads, regime, true width against C); and ``--pairs``
pairs of classes of one study whose true t50s are 5x apart (separation power) or equal
(false separations), both inside the range (:func:`stats.study_space.sample_pair`),
overall and by factor. Criteria: coverage >= 0.90 and power >= 0.90 over the space; false
separations <= 0.05 (the nominal level, within two binomial standard errors). Power is held to
the detectable pairs (both changes detectable, :attr:`stats.study_space.StudyTruth.detectable`,
a revision between the two t50s, without which the checkpoints cannot order them, and a gap of
at least 4 oracle standard errors: the counts' noise for aggregate counts, the spread of a few
followed heads' median, :func:`stats.study_space.oracle_median_se`) and
printed over the whole space besides; coverage is over the studies that report a t50 (the
share that do is a column).

Nulls simulated besides:
- step_vs_logistic: a single step between two adjacent revisions (random levels and
  gap), binomial counts of 128 heads; and the same with beta-binomial
  overdispersion phi = 4 on 256 heads.
- separation: two gradual logistic curves with the SAME t50 (ratio = 1, the
  boundary of H0: ratio <= 1), independent binomial counts.
- layer_floor: k ~ Binomial(N = 160 head-revisions, rate0 = 0.05), the boundary of
  H0 rate >= rate0.
- sign test (PR lead): the whole PR-lead pipeline on 30 final induction heads whose
  PR elevation is as likely 1-2 revisions after as before the crossing.
- middle-out permutation test: layer onsets drawn independently of the layer.
- the change test (the ``none`` rule of the verdict, :func:`stats.change.change_test`,
  a change called: rejected and not one revision's alone): flat curves with binomial
  draws (128 heads), beta-binomial phi = 4 (256 heads), and a flat population of
  followed heads with their flags (always-on heads plus 4 flickering heads near the
  threshold, :class:`stats.simulate.HeadPopulation`); the unimodal variant (used for
  curves that decline) on the same flat binomial curves.
"""

import argparse
import sys
import time

import numpy as np

ALPHA = 0.05


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", type=int, default=200)
    ap.add_argument("--n-boot", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--regimes-only", action="store_true", help="only the two regimes' rows (coverage, separation, declines)")
    ap.add_argument("--space-only", action="store_true", help="only the sampled space (coverage, separation by factor)")
    ap.add_argument("--studies", type=int, default=400, help="studies drawn from the space (0: none)")
    ap.add_argument("--pairs", type=int, default=200, help="pairs of classes drawn from the space, at 5x and at 1x each (0: none)")
    args = ap.parse_args()
    D, B = args.datasets, args.n_boot
    if args.space_only:
        t_start = time.perf_counter()
        print(f"calibration over the sampled space: {args.studies} studies, {args.pairs} pairs a ratio, "
              f"{B} bootstrap replicates, alpha = {ALPHA}")
        return summarise(space(args.studies, args.pairs, B, np.random.default_rng(args.seed)), t_start)

    from tqdm import tqdm

    from stats.changepoint import detect_changepoints
    from stats.findings import layer_onset
    from stats.hypotheses import clopper_pearson_upper, layer_floor_test, step_vs_logistic
    from stats.models import fit_all
    from stats.pr_lead import pr_lead
    from stats.simulate import logistic_probability, logspaced_tokens, pr_lead_heads, simulate_counts_once, step_probability
    from stats.times import bootstrap_transition_times, gap_ratio

    rng = np.random.default_rng(args.seed)
    tok = logspaced_tokens(1e9, 3e12, 10)
    rows = []  # (name, value, lo, hi) ; lo None: informational

    def report(name, value, lo=0.02, hi=0.08, n=D):
        rows.append((name, value, lo, hi, n))
        ok = "" if lo is None else ("PASS" if lo <= value <= hi else "FAIL")
        rng_txt = "" if lo is None else f"[{lo:.2f}, {hi:.2f}]"
        print(f"  {name:<68} {value:6.3f}  {rng_txt:<13} {ok}", flush=True)

    t_start = time.perf_counter()
    print(f"calibration: {D} data sets per test, {B} bootstrap replicates, alpha = {ALPHA}")

    if args.regimes_only:
        regimes(D, B, rng, report)
        return summarise(rows, t_start)

    # 1. step vs logistic, binomial null
    def step_test_rate(n_heads, phi, label):
        n = np.full(10, n_heads)
        p_vals, present = [], 0
        for _ in tqdm(range(D), desc=label, leave=False):
            p = step_probability(tok, rng.uniform(0, 0.2), rng.uniform(0.4, 0.8), int(rng.integers(1, 8)))
            k = simulate_counts_once(p, n, rng, phi)
            fits, disp = fit_all(tok, k, n)
            present += disp.present
            p_vals.append(step_vs_logistic(tok, k, n, B, rng, disp.phi_raw, fits).p_value)
        return np.mean(np.array(p_vals) <= ALPHA), present / D

    rate, present = step_test_rate(128, 1.0, "step test (binomial)")
    report("step_vs_logistic, H0 step, binomial, n = 128: rejection rate", rate)
    report("  (info) overdispersion flagged under binomial counts (nominal 0.05)", present, None)
    rate, present = step_test_rate(256, 4.0, "step test (phi = 4)")
    report("step_vs_logistic, H0 step, beta-binomial phi = 4, n = 256: rejection rate", rate)
    report("  (info) overdispersion flagged when phi = 4", present, None)

    # 2. separation at ratio = 1, and t50 coverage on the same gradual curves
    n = np.full(10, 128)
    rej, cover_first, cover_all, total = 0, 0, 0, 0
    for _ in tqdm(range(D), desc="separation / coverage", leave=False):
        t50 = 10 ** rng.uniform(10.0, 11.5)
        times = []
        for _c in range(2):
            p = logistic_probability(tok, rng.uniform(0, 0.05), rng.uniform(0.2, 0.7), t50, rng.uniform(1.0, 2.5))
            k = simulate_counts_once(p, n, rng)
            fits, disp = fit_all(tok, k, n)
            t = bootstrap_transition_times(fits["logistic"], disp, B, rng)[0]
            hit = (t.t50_ci[0] or 0) <= t50 <= (t.t50_ci[1] or np.inf)
            cover_all += hit
            total += 1
            if _c == 0:
                cover_first += hit
            times.append(t)
        rej += gap_ratio("sim", times[0], times[1]).p_value <= ALPHA
    report("separation, H0 ratio = 1 (boundary), gradual curves: rejection rate", rej / D)
    report("t50 95% interval coverage, gradual logistic (one curve a data set)", cover_first / D, 0.90, 0.98)
    report(f"  (info) t50 coverage over all {total} curves", cover_all / total, None, n=total)
    n256 = np.full(10, 256)
    cover = 0
    Dc = max(D // 2, 50)
    for _ in tqdm(range(Dc), desc="coverage, phi = 4", leave=False):
        t50 = 10 ** rng.uniform(10.0, 11.5)
        p = logistic_probability(tok, rng.uniform(0, 0.05), rng.uniform(0.2, 0.7), t50, rng.uniform(1.0, 2.5))
        k = simulate_counts_once(p, n256, rng, 4.0)
        fits, disp = fit_all(tok, k, n256)
        t = bootstrap_transition_times(fits["logistic"], disp, B, rng)[0]
        cover += (t.t50_ci[0] or 0) <= t50 <= (t.t50_ci[1] or np.inf)
    report("  (info) t50 coverage, beta-binomial phi = 4, n = 256", cover / Dc, None, n=Dc)

    # separation inside H0 with sharp curves in the same gap (conservative by construction)
    rej = 0
    Ds = max(D // 4, 50)
    for _ in tqdm(range(Ds), desc="separation, sharp", leave=False):
        j = int(rng.integers(2, 7))
        times = []
        for _c in range(2):
            k = simulate_counts_once(step_probability(tok, rng.uniform(0, 0.05), rng.uniform(0.3, 0.7), j), n, rng)
            fits, disp = fit_all(tok, k, n)
            times.append(bootstrap_transition_times(fits["logistic"], disp, B, rng)[0])
        rej += gap_ratio("sim", times[0], times[1]).p_value <= ALPHA
    report("  (info) separation, both curves step in the same gap: rejection rate", rej / Ds, None, n=Ds)

    # 3. layer floor, exact binomial at the boundary rate
    N, r0 = 160, 0.05
    ks = rng.binomial(N, r0, max(D, 4000))
    p = np.array([layer_floor_test(int(k), N, r0).p_value for k in ks])
    report(f"layer_floor, H0 rate >= {r0} at the boundary, N = {N}: rejection rate", float(np.mean(p <= ALPHA)), n=len(ks))
    rate_true = 0.02
    cover = np.mean([clopper_pearson_upper(int(k), N) >= rate_true for k in rng.binomial(N, rate_true, 4000)])
    report("  (info) exact 95% upper bound covers the true rate (>= 0.95 by construction)", float(cover), None, n=4000)

    # 4. sign test through the PR-lead pipeline, symmetric leads
    tok12 = logspaced_tokens(1e9, 1e12, 12)
    rej = 0
    for _ in tqdm(range(D), desc="PR lead sign test", leave=False):
        leads = rng.choice([-2, -1, 1, 2], size=30)
        heads = pr_lead_heads(tok12, 120, 30, leads, rng, crossing=rng.integers(3, 9, size=30))
        rej += pr_lead(heads, "sim").test.p_value <= ALPHA
    report("sign test (PR lead pipeline), H0 symmetric leads, 30 heads: rejection rate", rej / D)

    # 5. middle-out permutation test, onsets independent of layer
    import pandas as pd

    rej = 0
    for _ in tqdm(range(D), desc="middle-out permutation", leave=False):
        onset_rev = rng.integers(1, 10, size=16)
        rows_ = [{"model": "m", "revision": f"r{r}", "tokens": t, "layer": layer, "k": int(r >= onset_rev[layer]) * 3, "n": 16}
                 for r, t in enumerate(tok) for layer in range(16)]
        o = layer_onset(pd.DataFrame(rows_), "m", floor_layers=(0, 1), n_perm=999, rng=rng)
        rej += o.test.p_value <= ALPHA
    report("middle-out permutation test, H0 exchangeable onsets, 16 layers: rejection rate", rej / D)

    # 6. the change test (the verdict's none rule, stats/change.py), flat curves
    from stats.change import change_test
    from stats.simulate import HeadPopulation

    revs = [f"r{i}" for i in range(len(tok))]

    def called(k, n, flags=None, shape="monotone"):
        """A change the verdict would call: the test rejects and the change is not one revision's alone."""
        t = change_test(k, n, revs, flags, shape, 1999, rng, ALPHA)
        return t.p_value <= ALPHA and not t.details.get("single_revision")

    def change_rate(draw, shape="monotone"):
        return np.mean([called(*draw(), shape=shape) for _ in range(D)])

    report("change test (none rule), H0 flat, binomial, n = 128: a change called",
           change_rate(lambda: (simulate_counts_once(np.full(10, rng.uniform(0, 0.3)), n, rng), n)))
    report("change test (none rule), H0 flat, beta-binomial phi = 4, n = 256: a change called",
           change_rate(lambda: (simulate_counts_once(np.full(10, rng.uniform(0.02, 0.3)), n256, rng, 4.0), n256)))

    def flat_population():
        pop = HeadPopulation(256, 0, 1e11, 0.1, n_always=int(rng.integers(0, 60)), n_flicker=4, dropout=0.01).simulate(tok, rng)
        return pop.k, pop.n, pop.flags

    report("change test (none rule), H0 flat population, 4 flickering heads (head-wise): a change called",
           change_rate(flat_population))
    report("change test, unimodal variant (declining curves), H0 flat, binomial, n = 128: a change called",
           change_rate(lambda: (simulate_counts_once(np.full(10, rng.uniform(0, 0.3)), n, rng), n), "unimodal"))

    regimes(D, B, rng, report)
    rows += space(args.studies, args.pairs, B, rng)

    # 7. change points under no change (informational)
    false = sum(bool(detect_changepoints(tok, simulate_counts_once(np.full(10, rng.uniform(0.05, 0.5)), n, rng), n).points)
                for _ in range(D))
    report("  (info) change point (bic penalty) false alarms under a constant", false / D, None)

    return summarise(rows, t_start)


def summarise(rows, t_start) -> int:
    failed = [r for r in rows if r[2] is not None and not (r[2] <= r[1] <= r[3])]
    print(f"done in {time.perf_counter() - t_start:.0f} s: "
          f"{sum(r[2] is not None for r in rows) - len(failed)} criteria pass, {len(failed)} fail")
    return 1 if failed else 0


def space(n_studies: int, n_pairs: int, B: int, rng) -> list:
    """t50 coverage and separation over the sampled space, by factor (module docstring); returns the
    criteria rows (name, value, lo, hi, n)."""
    from stats.config import AnalysisConfig
    from stats.space_scores import errors, factor_table, pair_records, rate

    cfg = AnalysisConfig(n_boot=B, progress=False)
    rows = []

    def criterion(name, value, n, lo, hi):
        rows.append((name, value, lo, hi, n))
        ok = "PASS" if lo <= value <= hi else "FAIL"
        print(f"  {name:<68} {value:6.3f}  [{lo:.2f}, {hi:.2f}] ({n}) {ok}", flush=True)

    if n_studies:
        coverage(n_studies, cfg, rng, criterion)
    if not n_pairs:
        return rows
    limit = ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / max(n_pairs, 1))
    for ratio, lo, hi, label in ((5.0, 0.90, 1.0, "separation power at a 5x gap"),
                                 (1.0, 0.0, limit, "false separations at ratio 1 (nominal 0.05 + 2 SE)")):
        print(f"\n  pairs of classes at {ratio:g}x: {n_pairs} drawn from the space (stats/study_space.py sample_pair)")
        pairs = pair_records(n_pairs, ratio, cfg, rng, progress=True)
        for line in factor_table(pairs, {"separated": ("rejected", None)}):
            print(line, flush=True)
        for error, count in errors(pairs):
            print(f"  analysis raised on {count} pairs (counted as not separated): {error}")
        if ratio == 1.0:  # no pair at ratio 1 has a revision between its t50s: the whole space
            criterion(f"{label} over the sampled space", *rate(pairs, "rejected"), lo, hi)
            continue
        print(f"  {label} over the whole space: {rate(pairs, 'rejected')[0]:.3f} ({len(pairs)}; informational)")
        criterion(f"{label}, detectable pairs", *rate(pairs, "rejected", lambda r: r["detectable"] == "yes"), lo, hi)
    return rows


def coverage(n_studies: int, cfg, rng, criterion) -> None:
    """t50 coverage over ``n_studies`` studies of the space, overall and by factor."""
    from stats.space_scores import criterion_of, errors, factor_table, rate, study_records

    print(f"\n  the sampled space: {n_studies} studies drawn at random (stats/study_space.py), C = {criterion_of(cfg)}")
    records = study_records(n_studies, cfg, rng, progress=True)
    for line in factor_table(records, {"t50 coverage": ("covers", None),
                                       "coverage inside": ("covers", lambda r: r["inside"]),
                                       "bound holds (cens.)": ("covers", lambda r: not r["inside"]),
                                       "t50 reported": ("timed", None)}):
        print(line, flush=True)
    for error, count in errors(records):
        print(f"  analysis raised on {count} studies (counted as not covering): {error}")
    criterion("t50 95% interval coverage where a t50 is reported, whole space", *rate(records, "covers"), 0.90, 1.0)


def regimes(D: int, B: int, rng, report) -> None:
    """Coverage, bounds, separation and false declines in both regimes (module docstring)."""
    from tqdm import tqdm

    from stats.curve_analysis import analyse_curve
    from stats.gaps import fitted_gap
    from stats.config import AnalysisConfig
    from stats.phases import curve_phases
    from stats.simulate import FAMILIES, family, gap_pair, logspaced_tokens, score

    cfg = AnalysisConfig(n_boot=B, progress=False)
    inside = ("logistic-sharp", "logistic-gradual", "ramp", "step", "unequal-n", "rise-decline", "sharp", "gradual",
              "circuit-3-of-256")
    for regime in ("aggregate", "population"):
        print(f"\n  regime: {regime} ({'independent draws, no head identity' if regime == 'aggregate' else 'the same heads followed'})")
        for m in (10, 20):
            tok = logspaced_tokens(1e9, 3e12, m)
            hits = total = 0
            for name in [f for f in FAMILIES if f.startswith(regime)]:
                kind = name.split("/")[1]
                if kind not in inside and "censored" not in kind:
                    continue
                scores = [score(analyse_curve(s.curve(), cfg, rng), s.truth)
                          for s in tqdm((family(name, tok, rng) for _ in range(D)), total=D, desc=f"{name} m={m}", leave=False)]
                rate = float(np.mean([sc["covers"] for sc in scores]))
                what = "t50 95% interval coverage" if kind in inside else "censored bound holds (t50 on the true side)"
                report(f"    {name}, {m} revisions: {what}", rate, 0.90, 1.0)
                if kind in inside:
                    hits += sum(sc["covers"] for sc in scores)
                    total += len(scores)
            report(f"    {regime}, {m} revisions: t50 coverage over the inside families", hits / total, 0.90, 1.0, n=total)
        tok = logspaced_tokens(1e9, 3e12, 10)
        x = np.log10(tok)
        for ratio, lo, hi, label in ((5.0, 0.90, 1.0, "power at a 5x gap"), (1.0, 0.0, 0.08, "false separations at ratio 1")):
            rej = 0
            for _ in tqdm(range(D), desc=f"{regime} separation x{ratio}", leave=False):
                t50 = 10 ** rng.uniform(x[2], x[-3] - np.log10(ratio))
                early, late = gap_pair(regime, tok, t50, ratio, rng)
                g = fitted_gap("m", analyse_curve(late.curve("m", "bos"), cfg, rng),
                               analyse_curve(early.curve("m", "induction"), cfg, rng), cfg)
                rej += bool(np.isfinite(g.p_value) and g.p_value <= ALPHA)
            report(f"    {regime}, 10 revisions: separation {label}", rej / D, lo, hi)
        # the early class formed before the first revision (left-censored): the one-sided test
        rej = bounds = 0
        for _ in tqdm(range(D), desc=f"{regime} censored early", leave=False):
            early = family(f"{regime}/left-censored", tok, rng)
            late = gap_pair(regime, tok, tok[0] * 5 ** 0.5, 5.0, rng)[1]  # t50 5x after sqrt(5) t_1
            ae = analyse_curve(early.curve("m", "induction"), cfg, rng)
            g = fitted_gap("m", analyse_curve(late.curve("m", "bos"), cfg, rng), ae, cfg)
            bounds += g.bound == "lower"
            rej += bool(np.isfinite(g.p_value) and g.p_value <= ALPHA)
        report(f"    {regime}: early class formed before t_1, late t50 = 11 t_1: gap reported as a lower bound", bounds / D,
               0.90, 1.0)
        report(f"    {regime}: ... and the one-sided separation test rejects ratio <= 1", rej / D, None)
        for m in (10, 20):
            tok_m = logspaced_tokens(1e9, 3e12, m)
            false = 0
            kinds = ("logistic-sharp", "logistic-gradual") if regime == "aggregate" else ("sharp", "gradual")
            for _ in range(D):
                s = family(f"{regime}/{kinds[int(rng.integers(2))]}", tok_m, rng)
                false += curve_phases(s.curve(), 2.0, 0.2, ALPHA, 999, rng).decline is not None
            report(f"    {regime}, {m} revisions: decline reported on curves that only rise", false / D, 0.0, 0.08)


if __name__ == "__main__":
    sys.exit(main())
