"""Simulated curves with known answers (for the known-answer tests and benchmarks).

Two generative models:

- *Independent draws*: ``k ~ Binomial(n, p(t))`` (or beta-binomial with dispersion
  phi) afresh at every revision with token counts ``t``, for a probability ``p``
  that is a logistic in log10 tokens with a known t50 and 10-90 width, a step
  between two known revisions, or a constant.
- *Head populations* (:class:`HeadPopulation`): the same ``n`` heads followed
  across revisions, as a screen sees them. ``n_switch`` of them switch on at their
  own times, ``log10 tau_h ~ Normal(log10 t50, spread_decades)`` (a tight cluster:
  sharp; a wide spread: gradual), and stay on; ``n_always`` are on from the start;
  ``n_flicker`` heads near the threshold read on at each revision independently
  with probability ``flicker_p``; and a switched-on head reads off at a revision
  with probability ``dropout``. Then ``k_j = #{on at t_j}``: cumulative counts,
  not independent draws. Its known answers (:meth:`SimulatedPopulation.truth`):
  the switch-on times, and the share of the switching heads' time distribution in
  each checkpoint interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import norm

from emergence.contract import flag_column, selectivity_column
from stats.bootstrap import simulate_counts
from stats.errors import StatsError
from stats.models.logistic import LN9


def logspaced_tokens(first: float = 1e9, last: float = 3e11, m: int = 10) -> np.ndarray:
    """``m`` token counts evenly spaced in log10 from ``first`` to ``last``."""
    return np.logspace(np.log10(first), np.log10(last), m)


def logistic_probability(tokens, floor: float, ceiling: float, t50: float, width_decades: float) -> np.ndarray:
    """p(t) = floor + (ceiling - floor) expit(2 ln 9 / width * (log10 t - log10 t50))."""
    s = 2 * LN9 / width_decades
    return floor + (ceiling - floor) * expit(s * (np.log10(np.asarray(tokens, float)) - np.log10(t50)))


def step_probability(tokens, before: float, after: float, last_before: int) -> np.ndarray:
    """p = before at revisions 0..last_before, after from the next revision on."""
    p = np.full(len(tokens), float(before))
    p[last_before + 1 :] = after
    return p


def simulate_counts_once(p, n, rng: np.random.Generator, dispersion: float = 1.0) -> np.ndarray:
    """One count vector around probabilities ``p`` with totals ``n``."""
    n = np.broadcast_to(np.asarray(n, int), np.shape(p))
    return simulate_counts(p, n, 1, rng, dispersion)[0]


def curves_frame(model: str, klass: str, tokens, k, n, revisions: Optional[Sequence[str]] = None,
                 corpus: str = "simulated") -> pd.DataFrame:
    """A CSV-format table (model, class, tokens, k, n, revision, pretraining_corpus)."""
    tokens = np.asarray(tokens, float)
    revisions = [f"t{int(t)}" for t in tokens] if revisions is None else list(revisions)
    return pd.DataFrame({
        "model": model, "class": klass, "tokens": tokens, "k": np.asarray(k, int),
        "n": np.broadcast_to(np.asarray(n, int), tokens.shape), "revision": revisions, "pretraining_corpus": corpus,
    })


def pr_lead_heads(tokens, n_heads: int, n_induction: int, lead_revisions, rng: np.random.Generator,
                  crossing=None, model: str = "sim", base_pr: float = 20.0, noise: float = 1.0,
                  elevated_pr: float = 40.0) -> pd.DataFrame:
    """A per-head table with a known PR lead.

    Heads ``0 .. n_induction - 1`` become induction heads at revision ``crossing[h]``
    (default: drawn from the middle revisions) and their PR is elevated from
    ``crossing[h] - lead_revisions[h]`` on (a negative lead: elevated after crossing).
    Other heads keep PR ~ Normal(base_pr, noise). Columns: model, revision, tokens,
    layer, head, pr, flag.induction, selectivity.induction.
    """
    tokens = np.asarray(tokens, float)
    m = len(tokens)
    lead = np.broadcast_to(np.asarray(lead_revisions, int), (n_induction,))
    if crossing is None:
        lo = max(int(lead.max()), 0) + 1
        hi = m - 1 + min(int(lead.min()), 0)
        crossing = rng.integers(lo, max(hi, lo + 1), size=n_induction)
    crossing = np.broadcast_to(np.asarray(crossing, int), (n_induction,))
    rows = []
    per_layer = max(int(np.sqrt(n_heads)), 1)
    for r in range(m):
        for h in range(n_heads):
            pr = base_pr + noise * rng.standard_normal()
            flag = 0
            sel = 1.0 + rng.random()
            if h < n_induction:
                if r >= crossing[h] - lead[h]:
                    pr = elevated_pr + noise * rng.standard_normal()
                if r >= crossing[h]:
                    flag, sel = 1, 100.0 + h
            rows.append((model, f"t{int(tokens[r])}", tokens[r], h // per_layer, h % per_layer, pr, flag, sel))
    columns = ["model", "revision", "tokens", "layer", "head", "pr", flag_column("induction"), selectivity_column("induction")]
    return pd.DataFrame(rows, columns=columns)


#: 10-90 width of a normal distribution in units of its standard deviation (2 z_0.9).
NORMAL_WIDTH_PER_SD = 2 * float(norm.ppf(0.9))


@dataclass
class HeadPopulation:
    """Heads followed across revisions that switch on at their own times and stay on.

    ``log10 tau_h ~ Normal(log10 t50, spread_decades)`` for the ``n_switch``
    switching heads (their 10-90 width is ``2.563 spread_decades``); see the module
    docstring for the always-on, flicker and dropout heads. ``n_heads`` is the
    model's total (the curve's ``n``).
    """

    n_heads: int
    n_switch: int
    t50: float
    spread_decades: float
    n_always: int = 0
    n_flicker: int = 0
    flicker_p: float = 0.5
    dropout: float = 0.0

    def __post_init__(self):
        if self.n_switch + self.n_always + self.n_flicker > self.n_heads:
            raise StatsError(f"n_switch + n_always + n_flicker = {self.n_switch + self.n_always + self.n_flicker} "
                             f"exceeds n_heads = {self.n_heads}; choose counts that sum to at most n_heads")

    def simulate(self, tokens, rng: np.random.Generator, switch_log10=None) -> "SimulatedPopulation":
        """One population's flags at ``tokens``; ``switch_log10`` fixes the switch-on times."""
        tokens = np.asarray(tokens, float)
        x = np.log10(tokens)
        if switch_log10 is None:
            switch_log10 = rng.normal(np.log10(self.t50), self.spread_decades, self.n_switch)
        switch_log10 = np.asarray(switch_log10, float)
        m = len(tokens)
        flags = np.zeros((m, self.n_heads), bool)
        s = len(switch_log10)
        flags[:, :s] = x[:, None] >= switch_log10[None, :]
        if self.dropout > 0:
            flags[:, :s] &= rng.random((m, s)) >= self.dropout
        flags[:, s : s + self.n_always] = True
        f0 = s + self.n_always
        flags[:, f0 : f0 + self.n_flicker] = rng.random((m, self.n_flicker)) < self.flicker_p
        return SimulatedPopulation(tokens, flags, switch_log10)


@dataclass
class SimulatedPopulation:
    """Flags (m revisions x n heads) of one simulated population and its truth."""

    tokens: np.ndarray
    flags: np.ndarray
    switch_log10: np.ndarray

    @property
    def k(self) -> np.ndarray:
        return self.flags.sum(1)

    @property
    def n(self) -> np.ndarray:
        return np.full(len(self.tokens), self.flags.shape[1])

    def truth(self) -> dict:
        """Where the switching heads switch: per checkpoint interval, the number of
        heads (``interval_heads``) and the share of them (``interval_share``); the
        largest share ``max_share`` and its interval index ``max_interval``; heads
        switching before the first or after the last revision are counted as outside."""
        x = np.log10(self.tokens)
        j = np.searchsorted(x, self.switch_log10, side="left") - 1  # tau in (x_j, x_j+1]
        inside = (j >= 0) & (j < len(x) - 1)
        counts = np.bincount(j[inside], minlength=len(x) - 1)
        total = max(len(self.switch_log10), 1)
        share = counts / total
        i = int(np.argmax(share))
        return {"interval_heads": counts, "interval_share": share, "max_share": float(share[i]), "max_interval": i}

    def frame(self, model: str = "sim", klass: str = "bos", revisions: Optional[Sequence[str]] = None) -> pd.DataFrame:
        """The curve as a CSV-format table (:func:`curves_frame`)."""
        return curves_frame(model, klass, self.tokens, self.k, self.n, revisions)
