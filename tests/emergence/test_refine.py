"""The refinement planner (emergence/refine_rule.py) against known revisions with a known switch."""

import math

import pytest

from emergence.refine_rule import choose_inside, find_bracket, plan_round, simulate
from emergence.revisions import Revision, logspaced


def registry(n=1400, tokens_per_step=2_097_152 * 1000, step0=True):
    revs = [Revision(i * tokens_per_step, i * 1000, f"step{i * 1000}") for i in range(1, n)]
    return ([Revision(0, 0, "step0")] if step0 else []) + revs


def step_at(switch, n_heads=5):
    return lambda cls, r: float(n_heads if r.tokens >= switch.tokens else 0)


@pytest.mark.parametrize("switch_index", [3, 57, 300, 700, 1111, 1398])
@pytest.mark.parametrize("per_round", [1, 2, 3])
def test_refinement_finds_a_known_switch_exactly(switch_index, per_round):
    reg = registry()
    switch = reg[switch_index]
    start = logspaced(reg, 10)
    plans = simulate(reg, start, step_at(switch), ["induction"], per_round=per_round, rounds=40)
    last = plans[-1]
    assert last.done
    bracket = last.brackets["induction"]
    assert bracket.resolved and bracket.hi == switch
    assert reg.index(bracket.hi) - reg.index(bracket.lo) == 1
    screened = [r for p in plans for r in p.revisions]
    assert len(screened) == len(set(screened))          # never a revision twice
    assert not set(screened) & set(start)
    first = find_bracket({r: step_at(switch)("induction", r) for r in start}, "induction", reg)
    if per_round == 1:  # bisection in log tokens: about log2 of the bracket's size, with slack
        assert len(screened) <= math.ceil(math.log2(first.inside + 1)) + 4


def test_a_flat_curve_has_no_bracket_and_nothing_is_screened():
    reg = registry(200)
    plans = simulate(reg, logspaced(reg, 10), lambda c, r: 3.0, ["bos"], per_round=2, rounds=5)
    assert len(plans) == 1 and plans[0].done and plans[0].brackets["bos"] is None
    assert "no transition" in plans[0].describe()


def test_largest_jump_wins_and_ties_take_the_earliest():
    reg = registry(50, step0=False)
    pts = {reg[0]: 0, reg[10]: 2, reg[20]: 2, reg[30]: 8, reg[40]: 9}
    assert (find_bracket(pts, "bos", reg).lo, find_bracket(pts, "bos", reg).hi) == (reg[20], reg[30])
    tie = {reg[0]: 0, reg[10]: 3, reg[20]: 6}
    b = find_bracket(tie, "bos", reg)
    assert (b.lo, b.hi, b.inside) == (reg[0], reg[10], 9)


def test_choices_are_inside_even_in_log_tokens_and_distinct():
    reg = registry(1000, step0=False)
    b = find_bracket({reg[99]: 0, reg[998]: 4}, "induction", reg)
    chosen = choose_inside(b, reg, 3, taken=set())
    logs = [math.log10(r.tokens) for r in chosen]
    lo, hi = math.log10(reg[99].tokens), math.log10(reg[998].tokens)
    assert len(chosen) == 3 and all(reg[99] < r < reg[998] for r in chosen)
    for j, x in enumerate(logs, start=1):
        assert abs(x - (lo + (hi - lo) * j / 4)) < 0.01


def test_classes_share_revisions_and_zero_token_brackets_work():
    reg = registry(100)
    counts = {"induction": {reg[0]: 0, reg[99]: 4}, "bos": {reg[0]: 0, reg[99]: 7}}
    plan = plan_round(counts, reg, ["induction", "bos"], per_round=2)
    assert len(plan.revisions) == 4 and len(set(plan.revisions)) == 4   # bos takes the next-nearest ones
    assert all(reg[0] < r < reg[99] for r in plan.revisions)
    assert "adding" in plan.describe()


def test_bisection_takes_the_log_midpoint():
    reg = [Revision(s * 1000, s, f"step{s}") for s in range(1, 41)]
    b = find_bracket({reg[11]: 0, reg[39]: 2}, "induction", reg)
    assert choose_inside(b, reg, 1, set()) == [reg[21]]   # sqrt(12000 * 40000) = 21909 -> step22


def test_a_fall_is_not_refined_unless_asked_and_the_table_names_the_refined_brackets():
    """Issue 34, point 2: a count that rises, falls further, and rises again (1, 3, 0, 2, as the
    toy's BOS count does) brackets its largest rise, never the larger fall (the old rule, the
    largest absolute jump, chased the fall); ``declines`` brackets the fall as its own
    entry; the end-of-run table lists the brackets the rounds refined."""
    from emergence.console import format_refinement

    reg = registry(400, step0=False)
    up, down, again = reg[50], reg[150], reg[300]

    def count_at(cls, r):
        return 1.0 + 2.0 * (up <= r < down) - 1.0 * (r >= down) + 2.0 * (r >= again)  # 1, 3, 0, 2: the fall is largest

    start = [reg[0], reg[100], reg[200], reg[-1]]
    plans = simulate(reg, start, count_at, ["bos"], per_round=1, rounds=40)
    targeted = {(p.brackets["bos"].lo, p.brackets["bos"].hi) for p in plans if p.chosen.get("bos")}
    assert all(lo < hi and count_at("bos", hi) > count_at("bos", lo) for lo, hi in targeted)  # rises only
    assert plans[-1].done and plans[-1].brackets["bos"].hi in (up, again)
    both = simulate(reg, start, count_at, ["bos"], per_round=1, rounds=40, declines=True)
    fall = both[-1].brackets["bos decline"]
    assert fall.direction == "decline" and fall.resolved and fall.hi == down
    refined = {"bos": [p.brackets["bos"] for p in plans if p.chosen.get("bos")][:1]}
    table = format_refinement("m", plans[0], plans[-1], [r for p in plans for r in p.revisions], len(plans), refined)
    assert "| brackets refined |" in table and refined["bos"][0].span in table
