"""Sequential Monte Carlo p-values (stats/hypotheses.py sequential_p, Besag and Clifford 1991)."""

import numpy as np
import pytest

from stats.hypotheses import SEQUENTIAL_HITS, sequential_p


def test_a_statistic_inside_its_null_stops_early_and_an_extreme_one_uses_every_replicate():
    rng = np.random.default_rng(0)
    drawn = []

    def replicates(size):
        drawn.append(size)
        return rng.standard_normal(size)

    p, used = sequential_p(replicates, 0.0, 1000)
    assert used == sum(drawn) == 100 and p == pytest.approx(SEQUENTIAL_HITS / 40, rel=0.5)
    p, used = sequential_p(lambda size: rng.standard_normal(size), 10.0, 1000)
    assert (p, used) == (pytest.approx(1 / 1001), 1000)


def test_the_stopping_point_is_the_hits_th_exceedance():
    seq = np.array([1, 0, 1, 1, 0, 0, 1] * 50, float)
    chunks = iter(np.split(seq, [100, 200, 300]))
    p, used = sequential_p(lambda size: next(chunks), 0.5, 350, hits=3)
    assert p == pytest.approx(3 / 4) and used == 100  # the 3rd exceedance is the 4th replicate


def test_size_under_the_null_is_at_most_alpha():
    rng = np.random.default_rng(1)
    ps = [sequential_p(lambda size: rng.random(size), rng.random(), 999)[0] for _ in range(3000)]
    for alpha in (0.01, 0.05, 0.1):
        assert np.mean(np.array(ps) <= alpha) <= alpha + 2.5 * np.sqrt(alpha * (1 - alpha) / 3000)
