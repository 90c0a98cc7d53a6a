"""Evidence of change: does a curve change across its revisions by more than its noise?

The ``none`` check of the verdict rule (:mod:`stats.shape`). A curve is ``k_j`` of ``n_j``
heads at revisions ``t_1 < ... < t_m`` (fractions ``y_j = k_j / n_j``); H0: no change across
the revisions. The change is what the best monotone fit finds (``monotone``: non-decreasing or
non-increasing; ``unimodal`` for a rise that falls again, :mod:`stats.phases`), and its size is
measured against a stated noise model, by regime (:mod:`stats.shape`):

- ``identity`` with the heads' flags: *head-wise permutations*. Under H0 each head's flags
  are exchangeable over the revisions (a head near its threshold flickers at random, whatever
  its rate) and heads are independent, so each head's sequence is permuted on its own.
  Statistic: ``SS_p0 - SS_f`` (:func:`explained_ss`), the weighted sum of squares of the summed
  count's fractions that the monotone fit explains: an absolute size (a share of the variance
  calls a small monotone wobble as strong as a circuit switching on). 12 heads that switch on
  after the first of 6 revisions give p ~ 6^-12 (permuting whole revisions could not go below
  1/6). Heads that never change carry no information and drop out.
- otherwise (aggregate counts, independent draws around ``p(t)``; or followed heads without
  their flags): a *quasi-likelihood ratio*. With the monotone fit ``f`` (pool-adjacent-violators,
  the binomial maximum-likelihood monotone fit), the pooled fraction ``p0`` and
  ``SS_g = sum_j n_j (y_j - g_j)^2``::

      T   = (SS_p0 - SS_f) / (p0 (1 - p0) phi),
      phi = max(1, X2_f / (m - L)),   X2_f = sum_j n_j (y_j - f_j)^2 / (f_j (1 - f_j)),

  ``L`` the number of levels of ``f``: the change's Pearson chi-square in units of the
  dispersion around the fit, at least binomial (cumulative counts of followed heads vary less
  than fresh draws: the floor makes the test conservative there). Null: a parametric bootstrap
  from the constant curve, ``k*_j ~ beta-binomial(n_j, p0, phi_b)``, ``phi_b = max(1, X2_f /
  chi2_b)``, ``chi2_b ~ chi-square(m - L)`` (the dispersion's own uncertainty), ``T*`` with its
  own phi* (studentised). Measured size at alpha = 0.05 (300 flat curves a cell): 0.01-0.06 for
  binomial noise at 5, 10 and 40 revisions; at phi = 4, 0.05 at 10 and 40 revisions but 0.12 at
  5, which :func:`change_test` notes on such curves.

``p = (1 + #{T* >= T}) / (B + 1)`` over ``B = n_perm`` replicates, or Besag and Clifford's
(1991) sequential ``p = h / L`` once ``h`` = :data:`~stats.hypotheses.SEQUENTIAL_HITS` of the first ``L``
replicates reach ``T`` (a curve without change stops early). The head-wise test is exact in
size under its null; the bootstrap is approximate, as measured above (``tests/stats/test_change.py``;
the benchmarks measure both on simulated studies).

Persistence. A transition stays: a change carried by one revision is an outlier inside the
range, or, at the last revision, cannot be told from one. When H0 is rejected, the revision
after the first whose removal lowers ``T`` most is the candidate ``j``. If no neighbour shares
its level (:func:`_alone`: its neighbours lie nearer the other revisions' median than ``y_j``),
``j`` is removed and the test run again; if H0 is then kept, the change rests on that revision
alone (``details["single_revision"]``, ``"single_at"``: ``last`` or ``inside``, ``p_without``).
Both are asked: a revision whose level others share is part of a change however weak the test
without it (removing one of two revisions after a change at the end leaves one revision, whose
p cannot be small), and a revision alone beside a change the rest still shows is not what the
change rests on. The first revision is the baseline (counts start near zero).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from stats.bootstrap import simulate_counts
from stats.hypotheses import SEQUENTIAL_HITS, TestResult
from stats.isotonic import isotonic_fit, unimodal_fit, weighted_fractions

SHAPES = ("monotone", "unimodal")
#: Replicates drawn at a time.
CHUNK = 250
#: Up to this many revisions an overdispersed aggregate curve's test is noted as approximate.
FEW_REVISIONS = 6
#: The persistence check needs this many revisions (after removing one, three remain).
MIN_REVISIONS_PERSISTENCE = 4


def _fit(y: np.ndarray, w: np.ndarray, shape: str) -> np.ndarray:
    """The best fit of rows ``y`` (B, m) in the family ``shape``, either direction (least squares)."""
    if shape == "monotone":
        cands = (isotonic_fit(y, w), -isotonic_fit(-y, w))
    else:
        cands = (unimodal_fit(y, w)[0], -unimodal_fit(-y, w)[0])
    ss = [(w * (y - f) ** 2).sum(-1) for f in cands]
    return np.where((ss[0] <= ss[1])[:, None], cands[0], cands[1])


def _fitted(k, n, shape: str) -> tuple:
    """``(n, w, y, p0, fit, explained)`` of rows ``k`` (B, m) of ``n``: the weights, fractions, pooled
    fraction, the best fit of ``shape`` and the weighted sum of squares it explains, ``SS_p0 - SS_f``."""
    n, w, y, p0 = weighted_fractions(k, n)
    fit = _fit(y, w, shape)
    explained = np.maximum((w * (y - p0) ** 2).sum(-1) - (w * (y - fit) ** 2).sum(-1), 0.0)
    return n, w, y, p0, fit, explained


def quasi_lr(k, n, shape: str = "monotone") -> tuple:
    """``(T, phi, X2_f, m - L)`` of rows ``k`` (B, m) of ``n`` (module docstring, the aggregate statistic)."""
    n, w, y, p0, fit, explained = _fitted(k, n, shape)
    half = 0.5 / np.maximum(n, 1)
    fc = np.clip(fit, half, 1 - half)
    x2 = (w * (y - fit) ** 2 / (fc * (1 - fc))).sum(-1)
    levels = (np.abs(np.diff(fit, axis=-1)) > 1e-12).sum(-1) + 1
    df = np.maximum(y.shape[-1] - levels, 1)
    phi = np.maximum(1.0, x2 / df)
    v0 = (p0 * (1 - p0))[:, 0]
    t = np.where(v0 > 0, explained / np.where(v0 > 0, v0, 1) / phi, 0.0)
    return t, phi, x2, df


def explained_ss(k, n, shape: str = "monotone") -> np.ndarray:
    """``SS_p0 - SS_f`` of rows ``k`` (B, m) of ``n``: the weighted sum of squares of the fractions that
    the best fit of ``shape`` explains (the head-wise statistic: an absolute size, not a share)."""
    return _fitted(k, n, shape)[-1]


def _replicates(draw, stat: float, n_perm: int) -> tuple:
    """``(p, B used)``: replicates of the statistic from ``draw(size)`` in chunks, with the sequential stop.
    Not :func:`stats.hypotheses.sequential_p`: the stop is checked at a chunk's end, ``p = hits / used``."""
    hits = used = 0
    while used < n_perm:
        t_star = draw(min(CHUNK, n_perm - used))
        hits += int(np.sum(t_star >= stat - 1e-9 * max(1.0, abs(stat))))
        used += len(t_star)
        if hits >= SEQUENTIAL_HITS:
            return hits / used, used
    return (1.0 + hits) / (used + 1.0), used


def _statistic(k, n, flags, shape: str) -> float:
    """The observed statistic: with ``flags`` (m revisions x heads, booleans) ``SS_p0 - SS_f`` of the heads
    on, else ``T`` of the counts ``k``."""
    if flags is not None:
        return float(explained_ss(flags.sum(1).astype(float), n, shape)[0])
    return float(quasi_lr(k, n, shape)[0][0])


def _headwise(f: np.ndarray, n: np.ndarray, shape: str, n_perm: int, rng: np.random.Generator) -> tuple:
    """``(statistic, p, B, details)`` of the head-wise permutation test on the flags ``f`` (m x heads)."""
    m = f.shape[0]
    on = f.sum(0)
    vary = (on > 0) & (on < m)
    base = f[:, ~vary].sum(1).astype(float)
    fv = f[:, vary]
    stat = _statistic(None, n, f, shape)
    if not vary.any() or stat <= 0:
        return stat, 1.0, 0, {}

    def draw(size):
        idx = rng.random((size, m, fv.shape[1])).argsort(axis=1)
        perm = np.take_along_axis(np.broadcast_to(fv, (size,) + fv.shape), idx, axis=1)
        return explained_ss(perm.sum(2) + base, n, shape)

    p, used = _replicates(draw, stat, n_perm)
    return stat, p, used, {}


def _aggregate(k: np.ndarray, n: np.ndarray, shape: str, n_perm: int, rng: np.random.Generator) -> tuple:
    """``(statistic, p, B, details)`` of the quasi-likelihood bootstrap test (details: its ``phi``)."""
    t, phi, x2, df = quasi_lr(k, n, shape)
    stat, phi, x2, df = float(t[0]), float(phi[0]), float(x2[0]), int(df[0])
    if stat <= 0:
        return stat, 1.0, 0, {"phi": phi}
    p0 = np.full(len(k), k.sum() / n.sum())

    def draw(size):
        phi_b = np.maximum(1.0, x2 / np.maximum(rng.chisquare(df, size), 1e-12))
        return quasi_lr(simulate_counts(p0, np.round(n).astype(int), size, rng, phi_b), n, shape)[0]

    p, used = _replicates(draw, stat, n_perm)
    return stat, p, used, {"phi": phi}


NULLS = {"headwise_permutation": "no change: each head's flags exchangeable over the revisions, heads independent",
         "quasi_likelihood_bootstrap": "no change: beta-binomial draws around one level (dispersion from the data, >= 1)"}


def _test(k, n, flags, shape, n_perm, rng) -> tuple:
    """``(statistic, p, B, details)``: head-wise with ``flags``, else the quasi-likelihood bootstrap."""
    return _headwise(flags, n, shape, n_perm, rng) if flags is not None else _aggregate(k, n, shape, n_perm, rng)


def _alone(k, n, j: int) -> bool:
    """Whether revision ``j`` holds its level alone: its neighbours (the revisions before and after it,
    where there are) lie nearer the other revisions' median than its own fraction (the curve departs
    at ``j`` and comes back, or ends there); a neighbour at its level makes it part of a change."""
    y = k / np.where(n > 0, n, 1)
    baseline = float(np.median(np.delete(y, j)))
    neighbours = y[[i for i in (j - 1, j + 1) if 0 <= i < len(y)]]
    return bool(np.all(np.abs(neighbours - baseline) < np.abs(neighbours - y[j])))


def change_test(k, n, revisions, flags: Optional[np.ndarray] = None, shape: str = "monotone", n_perm: int = 1999,
                rng: Optional[np.random.Generator] = None, alpha: float = 0.05) -> TestResult:
    """The test of change of one curve, with its persistence check (module docstring): head-wise with
    ``flags`` (m x heads booleans, the heads followed), else the quasi-likelihood bootstrap."""
    if shape not in SHAPES:
        raise ValueError(f"change shape {shape!r}; valid: {list(SHAPES)}")
    rng = np.random.default_rng(0) if rng is None else rng
    k = np.asarray(k, float)
    n = np.asarray(n, float)
    flags = None if flags is None else np.asarray(flags, bool)
    revisions = [str(r) for r in revisions]
    m = len(k)
    name = "headwise_permutation" if flags is not None else "quasi_likelihood_bootstrap"
    if m < 2 or np.ptp(k / np.where(n > 0, n, 1)) == 0:
        return TestResult(name, NULLS[name], 0.0, 1.0, 0)
    stat, p, used, details = _test(k, n, flags, shape, n_perm, rng)
    if details.get("phi", 1.0) > 1.0 and m <= FEW_REVISIONS:
        details["note"] = (f"overdispersion (phi = {details['phi']:.2g}) estimated from {m} revisions: the change "
                           "test's size may exceed alpha (about 0.12 at phi = 4 with 5 revisions)")

    def without(j: int) -> tuple:  # the curve less revision j
        keep = np.arange(m) != j
        return k[keep], n[keep], None if flags is None else flags[keep]

    if p <= alpha and m >= MIN_REVISIONS_PERSISTENCE:
        j = 1 + int(np.argmin([_statistic(*without(j), shape) for j in range(1, m)]))
        if not _alone(k, n, j):
            return TestResult(name, NULLS[name], stat, p, used, details)
        _, p_without, _, _ = _test(*without(j), shape, n_perm, rng)
        details["p_without_most_influential"] = p_without
        details["most_influential"] = revisions[j]
        if p_without > alpha:
            details.update(single_revision=revisions[j], single_at="last" if j == m - 1 else "inside",
                           p_without=p_without)
    return TestResult(name, NULLS[name], stat, p, used, details)


#: How the change test is named in a reason.
TEST_NAMES = {"headwise_permutation": "head-wise permutation test",
              "quasi_likelihood_bootstrap": "quasi-likelihood bootstrap test"}


def test_label(change: TestResult) -> str:
    """The change test's name as a reason says it."""
    return TEST_NAMES.get(change.name, change.name.replace("_", " "))


def single_revision(test: Optional[TestResult]) -> Optional[str]:
    """The revision a rejected test's change rests on alone, or None."""
    return None if test is None else test.details.get("single_revision")


def describe_single(test: TestResult, k, n, revisions) -> str:
    """Why a change carried by one revision is not a transition (for the verdict's reason)."""
    rev, where, p2 = test.details["single_revision"], test.details["single_at"], test.details["p_without"]
    j = [str(r) for r in revisions].index(rev)
    count = f"{k[j]:g} of {n[j]:g} heads"
    if where == "last":
        return (f"a change seen at the last revision alone ({rev}: {count}; the change test p = {test.p_value:.3g}, "
                f"without {rev} p = {p2:.3g}): the start of a rise and a one-revision outlier cannot be told apart; "
                "a later checkpoint would tell")
    return (f"an outlier at {rev} ({count}): the change rests on that revision alone (the change test p = "
            f"{test.p_value:.3g}, without {rev} p = {p2:.3g}), not a transition")
