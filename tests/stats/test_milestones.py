"""First-crossing milestones and the milestone gap ratio on known tables."""

import pandas as pd
import pytest

from stats import analyse, read_csv
from stats.config import AnalysisConfig, MilestoneRuleConfig, MilestonesConfig, SensitivityConfig
from stats.errors import StatsError
from stats.milestones import MilestoneRule, first_crossing, milestone_gap

TOKENS = [1e9, 3e9, 1e10, 3e10, 1e11, 3e11]
BOS = [0, 2, 10, 40, 60, 80]       # of n = 100
IND = [0, 1, 4, 4, 5, 5]


def table(k, tokens=TOKENS, n=100):
    return pd.DataFrame({"revision": [f"r{i}" for i in range(len(tokens))], "tokens": tokens, "k": k, "n": [n] * len(tokens)})


def test_first_crossing_and_its_bracket():
    m = first_crossing(table(BOS), MilestoneRule("BOS-50%", "bos", min_fraction=0.5), "m", 30.0)
    assert m.reached and m.revision == "r4" and m.tokens == 1e11
    assert m.previous_revision == "r3" and m.bracket == [3e10, 1e11]
    assert m.rule == "first revision with bos fraction >= 50% at >= 30x"
    i = first_crossing(table(IND), MilestoneRule("induction formed", "induction", min_heads=3), "m")
    assert i.revision == "r2" and i.bracket == [3e9, 1e10]
    first = first_crossing(table([5] * 6), MilestoneRule("x", "bos", min_heads=3), "m")
    assert first.revision == "r0" and first.bracket == [None, 1e9]
    never = first_crossing(table(BOS), MilestoneRule("BOS-90%", "bos", min_fraction=0.9), "m")
    assert not never.reached and never.bracket == [3e11, None]


def test_milestone_gap_interval_is_the_bracket_ratio():
    late = first_crossing(table(BOS), MilestoneRule("BOS-50%", "bos", min_fraction=0.5), "m")
    early = first_crossing(table(IND), MilestoneRule("induction formed", "induction", min_heads=3), "m")
    g = milestone_gap(late, early)
    assert g.ratio == pytest.approx(1e11 / 1e10)
    assert g.ratio_ci == pytest.approx([3e10 / 1e10, 1e11 / 3e9])
    assert g.to_dict()["definition"] == "milestone" and g.to_dict()["p_value"] is None
    never = first_crossing(table(BOS), MilestoneRule("BOS-90%", "bos", min_fraction=0.9), "m")
    lb = milestone_gap(never, early)
    assert lb.bound == "lower" and lb.ratio == pytest.approx(3e11 / 1e10) and lb.ratio_ci[1] is None
    at_first = first_crossing(table([5] * 6), MilestoneRule("x", "induction", min_heads=3), "m")
    open_hi = milestone_gap(late, at_first)
    assert open_hi.ratio_ci[0] == pytest.approx(3e10 / 1e9) and open_hi.ratio_ci[1] is None


def test_analysis_lists_milestones_and_both_gap_definitions(tmp_path):
    rows = [{"model": "m", "class": c, "tokens": t, "k": k, "n": 100}
            for c, ks in (("bos", BOS), ("induction", IND)) for t, k in zip(TOKENS, ks)]
    path = tmp_path / "c.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    a = analyse(read_csv(path), AnalysisConfig(n_boot=50, progress=False))
    s = a.summary()
    names = {(m["model"], m["name"]): m for m in s["milestones"]}
    assert set(names) == {("m", n) for n in ("induction formed", "BOS-10%", "BOS-30%", "BOS-50%", "BOS-70%")}
    assert names[("m", "BOS-30%")]["tokens"] == 3e10 and names[("m", "BOS-70%")]["tokens"] == 3e11
    assert names[("m", "induction formed")]["tokens"] == 1e10
    assert {g["definition"] for g in s["gaps"]} == {"fitted", "milestone"}
    mg = next(g for g in s["gaps"] if g["definition"] == "milestone")
    assert mg["ratio"] == pytest.approx(10.0) and mg["late_milestone"] == "BOS-50%"
    assert s["gaps"][0]["definition"] == "fitted"
    assert s["sensitivity"] is None  # counts only: no per-head table


def test_custom_rules_and_bad_rules(tmp_path):
    rows = [{"model": "m", "class": c, "tokens": t, "k": k, "n": 100}
            for c, ks in (("bos", BOS), ("induction", IND)) for t, k in zip(TOKENS, ks)]
    path = tmp_path / "c.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    rules = [MilestoneRuleConfig("first BOS head", "bos", min_heads=1), MilestoneRuleConfig("induction formed", "induction", min_heads=3)]
    cfg = AnalysisConfig(n_boot=20, progress=False, sensitivity=SensitivityConfig(enabled=False),
                         milestones=MilestonesConfig(rules=rules, gap_late="first BOS head"))
    a = analyse(read_csv(path), cfg)
    assert [m.name for m in a.milestones] == ["first BOS head", "induction formed"]
    g = a.milestone_gap("m")  # first BOS head at 3e9 (r1), induction formed at 1e10 (r2)
    assert g.ratio == pytest.approx(0.3) and g.ratio_ci == pytest.approx([1e9 / 1e10, 3e9 / 3e9])
    with pytest.raises(StatsError, match="set exactly one of min_heads, min_fraction"):
        MilestoneRule("x", "bos", min_heads=2, min_fraction=0.5).validate()
    with pytest.raises(StatsError, match="head_class='sink'"):
        MilestoneRule("x", "sink", min_heads=2).validate()
    with pytest.raises(StatsError, match=r"min_fraction=1.5; must be in \(0, 1\]"):
        MilestoneRule("x", "bos", min_fraction=1.5).validate()


def test_gap_names_must_be_rule_names(tmp_path):
    path = tmp_path / "c.csv"
    pd.DataFrame([{"model": "m", "class": "bos", "tokens": t, "k": k, "n": 100} for t, k in zip(TOKENS, BOS)]).to_csv(path, index=False)
    cfg = AnalysisConfig(n_boot=20, progress=False, milestones=MilestonesConfig(gap_late="BOS-55%"))
    with pytest.raises(StatsError, match=r"analysis.milestones.gap_late='BOS-55%': not a milestone rule name; valid: \['induction formed'"):
        analyse(read_csv(path), cfg)


def test_rule_accepts_a_class_registered_after_import():
    """The class list is read from the registry when a rule is checked, not at import."""
    from emergence.common import head_classes
    from emergence.common.head_classes import HeadClass

    late = HeadClass(name="late_class", threshold=30.0, excludes_key0=True, targets=lambda ids, settings: None)
    with pytest.raises(StatsError, match="head_class='late_class'"):
        MilestoneRule("late", "late_class", min_heads=1).validate()
    head_classes.register(late)
    try:
        MilestoneRule("late", "late_class", min_heads=1).validate()
    finally:
        head_classes.unregister("late_class")
