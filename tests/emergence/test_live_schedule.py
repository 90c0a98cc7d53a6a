"""The live monitor's grids, detector and schedule (pure Python: no model, no store)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from emergence.live.detector import JumpDetector, Observation
from emergence.live.schedule import AdaptiveSchedule, log_grid_next


def live(**over):
    base = dict(classes=["induction", "bos"], first_step=10, screens_per_decade=20.0, saves_per_decade=2.0,
                dense_every=5, settle=2, min_jump=1, window=4, loss_drop=0.5, lookback=True)
    base.update(over)
    return SimpleNamespace(**base)


def obs(step, ind=0, bos=0, loss=4.0):
    return Observation(step, {"induction": float(ind), "bos": float(bos)}, loss)


@pytest.mark.parametrize("first,per_decade", [(1, 10.0), (10, 40.0), (50, 4.0), (7, 3.3)])
def test_log_grid_is_increasing_and_log_spaced(first, per_decade):
    steps, s = [], 0
    while s < 5000:
        s = log_grid_next(s, first, per_decade)
        steps.append(s)
    assert steps[0] == first and all(b > a for a, b in zip(steps, steps[1:]))
    expected = sorted({round(first * 10 ** (i / per_decade)) for i in range(200)} - {0})
    assert steps == [x for x in expected if x <= steps[-1]]
    big = [x for x in steps if x > 200]   # away from integer rounding: 1/per_decade decades apart
    assert all(abs(math.log10(b / a) - 1 / per_decade) < 0.01 for a, b in zip(big, big[1:]))


def test_a_flat_count_triggers_on_its_first_change_and_a_flickering_one_only_past_its_flicker():
    d = JumpDetector(["induction", "bos"], min_jump=1, window=4, loss_drop=None)
    assert d.update(obs(0)) is None and d.update(obs(1)) is None
    assert d.update(obs(2, ind=2)) == "count.induction 0 -> 2"
    assert d.update(obs(3, ind=3)) == "count.induction 2 -> 3"   # a steady rise keeps triggering
    flicker = JumpDetector(["bos"], min_jump=1, window=4, loss_drop=None)
    reasons = [flicker.update(obs(i, bos=b)) for i, b in enumerate([0, 0, 2, 0, 2, 0, 2, 0, 5])]
    assert reasons[2] == "count.bos 0 -> 2"                      # the first change of a flat count
    assert reasons[3:8] == [None] * 5                             # +-2 flicker: no transition
    assert reasons[8] == "count.bos 0 -> 5"                      # a jump past the flicker


def test_min_jump_and_the_loss_rule():
    d = JumpDetector(["induction"], min_jump=2, window=4, loss_drop=0.5)
    assert d.update(obs(0, loss=4.0)) is None
    assert d.update(obs(1, ind=1, loss=3.9)) is None             # 1 head < min_jump
    assert d.update(obs(2, ind=1, loss=3.0)) == "induction_loss 3.900 -> 3.000"
    noisy = JumpDetector(["induction"], window=4, loss_drop=0.5)
    for i, loss in enumerate([4.0, 4.7, 4.0, 4.7]):              # rises of 0.7 in the window
        noisy.update(obs(i, loss=loss))
    assert noisy.update(obs(4, loss=4.1)) is None                 # a fall of 0.6 is within the noise


def run(schedule, counts, until):
    """Feed ``counts(step) -> (ind, bos)`` at every due step up to ``until``; the saves and screens."""
    saved, screens = [], []
    for step in range(until + 1):
        if schedule.due(step):
            d = schedule.observe(step, None if counts(step) is None else obs(step, *counts(step)))
            screens.append(step)
            if d.save_previous:
                saved.append(screens[-2])
            if d.save:
                saved.append(step)
    return saved, screens


def test_sparse_saves_without_transitions():
    s = AdaptiveSchedule(live())
    saved, screens = run(s, lambda step: (0, 0), 1000)
    assert screens[:3] == [0, 10, 11] and len(screens) > 35
    assert saved == [0, 10, 32, 100, 316, 1000]                   # the first screen, then 2 a decade


def test_a_jump_saves_the_screen_before_it_and_a_dense_window_after_it():
    s = AdaptiveSchedule(live())
    saved, screens = run(s, lambda step: (2 if step >= 457 else 0, 0), 1000)
    before = max(x for x in screens if x < 457)
    after = min(x for x in screens if x >= 457)
    assert before in saved and after in saved                     # the jump lies between two saved, adjacent screens
    assert math.log10(after / before) <= 1 / 20 + 1e-9
    window = [x for x in saved if after < x < after + 20]
    assert window == [after + 5, after + 10]                      # dense_every=5 until 2 quiet screens
    assert [x for x in screens if after < x <= after + 10] == window


def test_a_failing_screen_keeps_the_sparse_saves_and_is_retried_at_the_next_save():
    s = AdaptiveSchedule(live())
    ok = {0, 1000}
    saved, screens = run(s, lambda step: (0, 0) if step in ok else None, 1000)
    assert saved == [0, 10, 32, 100, 316, 1000]                   # saving goes on
    assert screens == saved                                       # only at the saves while it fails


def test_the_state_restores_the_same_decisions():
    counts = lambda step: (2 if step >= 457 else 0, (step // 7) % 3)  # noqa: E731
    ref = AdaptiveSchedule(live())
    ref_saved, ref_screens = run(ref, counts, 1200)
    first = AdaptiveSchedule(live())
    saved, screens = [], []
    for step in range(600):
        if first.due(step):
            d = first.observe(step, obs(step, *counts(step)))
            screens.append(step)
            saved += ([screens[-2]] if d.save_previous else []) + ([step] if d.save else [])
    state = json.loads(json.dumps(first.state_dict()))
    resumed = AdaptiveSchedule(live())
    resumed.load_state_dict(state)
    more, more_screens = run(resumed, lambda step: counts(step) if step >= 600 else (0, 0), 1200)
    more = [x for x in more if x >= 600]
    assert saved + more == ref_saved
    assert screens + [x for x in more_screens if x >= 600] == ref_screens
