"""When each followed head switched on: one notion of *settled* for the width rule, censoring and times.

Where a per-head table follows the same heads, each head's 0/1 flags over the revisions
``0 .. m-1`` say when it joined the class. For one head:

- its **switch-on** ``j`` is the first revision where the least-squares non-decreasing fit
  of its flags (pool-adjacent violators, :func:`stats.isotonic.isotonic_fit`) exceeds 1/2:
  from there on it is on at more than half of the revisions pooled with it, so one dropout
  after it or one flicker before it does not move it;
- it is **settled** when the switch-on is one its own history rarely gives by chance:
  at least :data:`SETTLED_REVISIONS` revisions from ``j`` to the end, on at each of the last
  :data:`SETTLED_REVISIONS` (on at the last revision alone is not told from an outlier), on
  at :data:`SETTLED_SHARE` of the revisions since, and, with ``q = k_b / j`` its on-rate at
  the ``j`` revisions before and ``k_a`` of the ``L = m - j`` since on,
  ``P(Binomial(L, q) >= k_a) <= SETTLE_ALPHA``. A head off before (``q = 0``) or on from the
  first revision (``j = 0``) settles at once; one on at half the revisions before needs seven
  on since. A head flickering at random settles by chance (measured, 20,000 heads: at a rate
  of 0.3, 1-5 %; at 1/2, 3 % on 40 revisions, 9 % on 10, 13 % on 6): the class's floors
  (``min_rise_heads``) and the change tests weigh the rest.

Persistence is counted on the grid there is. :func:`switch_on` gives every head's ``j`` (-1:
never settled); :func:`switched_counts` the heads switched on at each revision
(non-decreasing: they bound a rise's width, :mod:`stats.width`); :func:`settled_at_end` the
heads settled at the last revisions, on ``flags[::-1]`` those present from the first.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

from stats.isotonic import isotonic_fit

#: A switch-on needs at least this many revisions from it to the end.
SETTLED_REVISIONS = 2
#: The largest chance, under the head's own on-rate before, of its run since (module docstring).
SETTLE_ALPHA = 0.01
#: A settled head is on at least at this share of the revisions since its switch-on (a dropout now and then).
SETTLED_SHARE = 0.75


def switch_on(flags) -> np.ndarray:
    """Each head's settled switch-on revision (module docstring): an int array over the heads of
    ``flags`` (revisions x heads), -1 for a head that never settles."""
    f = np.asarray(flags, float)
    m, h = f.shape
    if f.size == 0:
        return np.full(h, -1)
    on = isotonic_fit(f.T, np.ones_like(f.T)) > 0.5 + 1e-9  # heads x revisions
    j = np.where(on.any(1), on.argmax(1), m)
    before = np.vstack([np.zeros((1, h)), np.cumsum(f, 0)])  # flags on before each revision
    k_b = before[j, np.arange(h)]
    L, k_a = m - j, before[-1] - k_b
    q = np.where(j > 0, k_b / np.maximum(j, 1), 0.0)
    chance = binom.sf(k_a - 1, np.maximum(L, 1), q)  # a head with L = 0 fails L >= SETTLED_REVISIONS below
    on_at_end = f[-SETTLED_REVISIONS:].all(0) if m >= SETTLED_REVISIONS else np.zeros(h, bool)
    steady = k_a >= SETTLED_SHARE * L
    settled = (L >= SETTLED_REVISIONS) & on_at_end & steady & (chance <= SETTLE_ALPHA)
    return np.where(settled, j, -1)


def switched_counts(flags) -> np.ndarray:
    """The number of heads of ``flags`` (revisions x heads) switched on, settled, at each revision."""
    f = np.asarray(flags)
    j = switch_on(f)
    return (j[j >= 0][None, :] <= np.arange(f.shape[0])[:, None]).sum(1).astype(float)


def settled_at_end(flags) -> np.ndarray:
    """Which heads of ``flags`` (revisions x heads) are settled at the last revisions (a bool array)."""
    return switch_on(flags) >= 0
