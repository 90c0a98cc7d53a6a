"""stats/switching.py: a head's switch-on from its own flags, and when it is settled."""

import numpy as np

from stats.switching import settled_at_end, switch_on, switched_counts


def heads(*rows):
    return np.array(rows, bool).T  # revisions x heads


def test_a_head_off_before_settles_with_two_revisions_whatever_the_grid():
    assert list(switch_on(heads([0, 0, 0, 1, 1, 1]))) == [3]  # between the 3rd and 4th of 6, then stays
    assert list(switch_on(heads([0, 1, 1, 1, 1, 1]))) == [1]  # at the second revision
    assert list(switch_on(heads([0, 0, 0, 1, 1]))) == [3]  # the last two of 5
    assert list(switch_on(heads([0, 0, 0, 0, 1]))) == [-1]  # the last revision alone: not settled


def test_a_dropout_after_switching_on_does_not_move_it_but_the_end_must_be_on():
    assert list(switch_on(heads([0, 0, 1, 1, 0, 1, 1, 1]))) == [2]
    assert list(switch_on(heads([0, 0, 1, 1, 1, 1, 1, 0]))) == [-1]  # off at the end: has not stayed


def test_a_flickering_head_needs_a_run_its_own_rate_would_rarely_give():
    # on at half of the revisions before: a run of three on is what its rate gives one time in eight
    assert list(switch_on(heads([1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1]))) == [-1]
    # the same rate before, then seven on in a row (1/128 by chance): settled
    assert list(switch_on(heads([1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1]))) == [8]


def test_counts_and_presence_at_either_end():
    f = heads([1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1])
    assert list(switched_counts(f)) == [1, 1, 2, 2, 2, 2]
    assert list(settled_at_end(f)) == [True, True, False, False]
    assert list(settled_at_end(f[::-1])) == [True, False, True, False]  # present from the first revisions


def test_heads_flickering_at_random_rarely_settle():
    rng = np.random.default_rng(0)
    for m in (10, 40):
        assert settled_at_end(rng.random((m, 5000)) < 0.3).mean() < 0.05
        assert settled_at_end(rng.random((m, 5000)) < 0.1).mean() < 0.01
