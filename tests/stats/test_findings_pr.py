"""Layer floor, per-layer onset, circuit convergence and PR lead on known inputs."""

import numpy as np
import pandas as pd
import pytest

from stats.findings import circuit_convergence, layer_floor, layer_onset
from stats.pr_lead import pr_lead
from stats.simulate import logspaced_tokens, pr_lead_heads

TOK = logspaced_tokens(1e9, 1e12, 10)


def counts_table(onsets, n_layers=8, n_heads=8, per_layer_k=4):
    rows = []
    for r, t in enumerate(TOK):
        for layer in range(n_layers):
            on = onsets.get(layer)
            rows.append({"model": "m", "revision": f"r{r}", "tokens": t, "layer": layer,
                         "k": per_layer_k if (on is not None and r >= on) else 0, "n": n_heads})
    return pd.DataFrame(rows)


def test_layer_floor_zero_and_exact_bound():
    counts = counts_table({l: 3 for l in range(2, 8)})
    f = layer_floor(counts, "m")
    assert f.holds and f.k == 0 and f.N == 2 * 8 * 10
    assert f.upper_bound == pytest.approx(1 - 0.05 ** (1 / 160))
    assert f.upper_bound_heads == pytest.approx(1 - 0.05 ** (1 / 16))
    assert f.test.p_value < 0.001
    counts.loc[(counts["layer"] == 1) & (counts["revision"] == "r9"), "k"] = 2
    f2 = layer_floor(counts, "m")
    assert not f2.holds and f2.k == 2 and f2.upper_bound > f.upper_bound


def test_layer_floor_counts_distinct_heads_of_its_own_model_only():
    counts = counts_table({l: 3 for l in range(2, 8)})
    heads = pd.DataFrame([{"model": model, "revision": "r9", "layer": 0, "head": h, "flag.bos": flag}
                          for model, flag in (("m", 0), ("other", 1)) for h in range(8)])
    f = layer_floor(counts, "m", heads=heads)
    assert f.heads_ever == 0  # the other model's eight flagged floor heads are not this model's
    heads.loc[(heads["model"] == "m") & (heads["head"] == 3), "flag.bos"] = 1
    assert layer_floor(counts, "m", heads=heads).heads_ever == 1


def test_middle_out_onset_is_detected():
    # 8 layers: middle layers 3, 4 first, then spreading out; floor 0, 1 never
    onsets = {3: 2, 4: 2, 2: 4, 5: 4, 6: 6, 7: 7}
    o = layer_onset(counts_table(onsets), "m", n_perm=1999, rng=np.random.default_rng(0))
    assert o.first_layers == [3, 4]
    assert o.never_layers == [0, 1]
    assert o.last_layers == [7]
    assert o.test.statistic > 0.8 and o.test.p_value < 0.05
    # reversed (outside first) is not significant in the middle-out direction
    rev = {3: 7, 4: 7, 2: 4, 5: 4, 6: 2, 7: 2}
    assert layer_onset(counts_table(rev), "m", n_perm=999, rng=np.random.default_rng(1)).test.p_value > 0.5


def test_middle_first_verdict_and_its_two_tests():
    # 16 layers: the middle first, spreading down to the floor (L2, L3 last) and up more quickly
    onsets = {7: 1, 8: 1, 9: 2, 10: 2, 6: 2, 5: 3, 11: 3, 12: 3, 13: 4, 14: 4, 15: 5, 4: 5, 3: 7, 2: 8}
    o = layer_onset(counts_table(onsets, n_layers=16), "m", n_perm=1999, rng=np.random.default_rng(2), persist=2)
    assert o.just_above == [2, 3] and o.verdict == "yes"
    assert o.depth_test.p_value < 0.05 and o.last_test.p_value < 0.05
    # the layers just above the floor first: no
    early_low = {2: 1, 3: 1, 4: 2, 5: 3, 6: 4, 7: 5, 8: 5, 9: 5, 10: 5, 11: 5, 12: 5, 13: 5, 14: 5, 15: 5}
    o = layer_onset(counts_table(early_low, n_layers=16), "m", n_perm=999, rng=np.random.default_rng(3), persist=2)
    assert o.verdict == "no"
    # spreading down from the middle, but the top layers are the last, not L2/L3: mixed
    mixed = {**onsets, 12: 9, 13: 9, 14: 9, 15: 9}
    o = layer_onset(counts_table(mixed, n_layers=16), "m", n_perm=999, rng=np.random.default_rng(4), persist=2)
    assert o.depth_test.p_value < 0.05 and o.last_test.p_value > 0.05 and o.verdict == "mixed"


def test_an_onset_must_persist():
    counts = counts_table({4: 6, 5: 3})
    # one head in layer 4 at r1 only, gone at r2: not layer 4's onset
    counts.loc[(counts["layer"] == 4) & (counts["revision"] == "r1"), "k"] = 1
    assert layer_onset(counts, "m", n_perm=99, persist=1).onset[4] == TOK[1]
    assert layer_onset(counts, "m", n_perm=99, persist=2).onset[4] == TOK[6]
    assert layer_onset(counts, "m", n_perm=99, persist=2).onset[5] == TOK[3]


def test_circuit_convergence_known_recall():
    rows = []
    final = [(5, 0), (5, 1), (6, 2)]
    found_from = {(5, 0): 2, (5, 1): 4, (6, 2): 8}  # recall 1/3 at r2, 2/3 at r4, 1 at r8
    for r, t in enumerate(TOK):
        for layer in range(8):
            for h in range(4):
                on = found_from.get((layer, h))
                rows.append({"model": "m", "revision": f"r{r}", "tokens": t, "layer": layer, "head": h,
                             "flag.induction": int(on is not None and r >= on)})
    c = circuit_convergence(pd.DataFrame(rows), "m")
    assert c.n_final == len(final)
    assert set(found_from) == set(final)  # the circuit at the last revision is exactly these heads
    assert c.table["n_found"].tolist()[-1] == len(final)
    assert c.revision_at_level == "r4" and c.tokens_at_level == TOK[4]
    assert c.pct_training == pytest.approx(100 * TOK[4] / TOK[-1])
    assert c.table["recall"].tolist()[:5] == pytest.approx([0, 0, 1 / 3, 1 / 3, 2 / 3])


def test_pr_lead_recovers_a_known_lead():
    rng = np.random.default_rng(2)
    heads = pr_lead_heads(TOK, 64, 8, 2, rng, crossing=[4, 5, 6, 7, 4, 5, 6, 7])
    lead = pr_lead(heads, "sim")
    assert len(lead.heads) == 8
    for h in lead.heads:
        i = list(TOK).index(h.tokens_crossed)
        assert h.tokens_elevated == TOK[i - 2]
        assert h.lead_ratio == pytest.approx(TOK[i] / TOK[i - 2])
    assert lead.counts == {"before": 8, "same": 0, "after_or_never": 0, "not_observable": 0}
    assert lead.at_or_before == 1.0
    assert lead.test.p_value == pytest.approx(0.5**8)
    assert lead.median_lead_ratio == pytest.approx((TOK[1] / TOK[0]) ** 2)


def test_pr_lead_without_lead_is_not_significant_and_lag_is_negative():
    rng = np.random.default_rng(3)
    lag = pr_lead(pr_lead_heads(TOK, 64, 8, -1, rng), "sim")
    assert lag.counts["after_or_never"] == 8 and lag.test.p_value == 1.0
    same = pr_lead(pr_lead_heads(TOK, 64, 8, 0, rng), "sim")
    assert same.counts["same"] == 8 and same.test.p_value == 1.0


def _one_head(pr, crossing, n_other=30, rng=None):
    """A per-head table: one induction head with the given PR trajectory (crossing at index
    ``crossing``), other heads at PR ~ 10 +- 1 (the elevation line near 13)."""
    rng = np.random.default_rng(0) if rng is None else rng
    rows = []
    for r, t in enumerate(TOK):
        rows.append({"model": "m", "revision": f"r{r}", "tokens": t, "layer": 0, "head": 0, "pr": pr[r],
                     "flag.induction": int(r >= crossing), "selectivity.induction": 100.0 if r >= crossing else 1.0})
        for h in range(1, n_other + 1):
            rows.append({"model": "m", "revision": f"r{r}", "tokens": t, "layer": h // 8, "head": h % 8,
                         "pr": 10 + rng.standard_normal(), "flag.induction": 0, "selectivity.induction": 1.0})
    return pr_lead(pd.DataFrame(rows), "m").heads[0]


def test_a_pr_lead_must_persist_through_the_crossing():
    base = [10.0] * 10
    # a rise at r2 that stays up: a lead of two revisions
    h = _one_head([10, 10, 40, 35, 30, 30, 30, 30, 30, 30], 4)
    assert h.sign == 1 and h.revision_elevated == "r2" and h.lead_ratio == pytest.approx(TOK[4] / TOK[2])
    # a bump at r1 that falls back below its line, then a rise at the crossing: at or before, same revision
    h = _one_head([10, 40, 10, 10, 40, 40, 40, 40, 40, 40], 4)
    assert h.sign == 0 and h.outcome == "same revision" and h.revision_elevated == "r4"
    # elevated only after the crossing
    h = _one_head(base[:6] + [40] * 4, 4)
    assert h.sign == -1 and h.revision_elevated == "r6"
    # crossing at the first revision: nothing to see before it
    h = _one_head([40] * 10, 0)
    assert h.sign is None and h.outcome == "not observable"


def test_pr_lead_sign_test_small_calibration_under_symmetric_leads():
    rng = np.random.default_rng(4)
    rej = 0
    for _ in range(100):
        leads = rng.choice([-2, -1, 1, 2], size=20)
        heads = pr_lead_heads(logspaced_tokens(1e9, 1e12, 12), 100, 20, leads, rng,
                              crossing=rng.integers(3, 9, size=20))
        rej += pr_lead(heads, "sim").test.p_value <= 0.05
    assert rej / 100 <= 0.1


def test_pr_lead_needs_a_pr_column():
    heads = pr_lead_heads(TOK, 16, 2, 1, np.random.default_rng(5)).drop(columns=["pr"])
    assert pr_lead(heads, "sim") is None
