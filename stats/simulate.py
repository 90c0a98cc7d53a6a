"""Simulated curves with known answers (for the known-answer tests and benchmarks).

``k ~ Binomial(n, p(t))`` (or beta-binomial with dispersion phi) at revisions with
token counts ``t``, for a probability ``p`` that is a logistic in log10 tokens with a
known t50 and 10-90 width, a step between two known revisions, or a constant.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd
from scipy.special import expit

from stats.bootstrap import simulate_counts
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
    return pd.DataFrame(rows, columns=["model", "revision", "tokens", "layer", "head", "pr", "flag.induction", "selectivity.induction"])
