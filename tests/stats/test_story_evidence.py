"""One story that follows the evidence (issue 33, point 6), with known answers: a gap is established
only where the fitted interval or the milestone bracket excludes 1 and nothing points the other way;
a figure contradicted by the fitted interval and the sensitivity table is never the one to trust;
bounds print as bounds in the story line, the gaps and the sensitivity tables; the source line is
readable; each model's section opens with a summary."""

from __future__ import annotations

from stats.milestones import Milestone, milestone_gap
from stats.report import render_report, source_line
from stats.sensitivity import SensitivityRow
from stats.story import GapStory, describe_milestone_gap, weigh


def fitted(ratio, lo, hi, bound=None, p=0.5):
    return {"ratio": ratio, "ratio_ci": [lo, hi], "bound": bound, "p_value": p}


def milestone_dict(ratio, lo, hi, bound=None):
    return {"ratio": ratio, "ratio_ci": [lo, hi], "bound": bound, "late_milestone": "BOS-50%",
            "early_milestone": "induction formed"}


def row(threshold, ratio, lo, hi, head_class="bos", bound=None, max_fraction=0.5, min_fraction=0.0, censored=None):
    return SensitivityRow(model="m", head_class=head_class, threshold=threshold, other_class="induction",
                          other_threshold=50.0, is_analysis_threshold=False, k_last=3.0, n_last=16.0,
                          max_fraction=max_fraction, min_fraction=min_fraction, shape="sharp", reason="-",
                          gap_ratio=ratio, gap_ratio_ci=[lo, hi], gap_bound=bound, censored=censored,
                          threshold_text=f"{threshold:g}x")


def story(f, m, agree=False, disagreement="direction"):
    return GapStory("m", "text", f, m, agree=agree, disagreement=disagreement,
                    reasons=["censoring: milestone 'BOS-50%' is not reached by the last revision"],
                    late_class="bos", early_class="induction")


def test_the_default_toy_job_reads_not_established_and_trusts_no_milestone_bound():
    # fitted 0.6 [0.324, 1.24]; BOS-50 % never reached (>= 1.67x); BOS at 10x / 20x: 0.35 / 0.48
    st = weigh(story(fitted(0.6, 0.324, 1.24, p=0.965), milestone_dict(1.67, 1.67, None, "lower")),
               [row(10, 0.35, 0.2, 0.9), row(20, 0.48, 0.25, 1.1)])
    assert st.established is None and st.trust is None
    assert st.assessment.startswith("The gap is not established: the fitted gap 0.6 [0.324, 1.24] does not exclude 1")
    assert "The milestone gap is a lower bound, not a figure: BOS-50% is not reached" in st.assessment
    line = st.warning()
    assert "Trust: the milestone" not in line and "Trust neither: the gap is not established" in line


def test_after_refinement_the_fitted_interval_and_the_sensitivity_table_win():
    # fitted 0.543 [0.379, 0.791] excludes 1; every sensitivity row below 1; the milestone a bound >= 1.67
    st = weigh(story(fitted(0.543, 0.379, 0.791, p=0.99), milestone_dict(1.67, 1.67, None, "lower")),
               [row(10, 0.35, 0.2, 0.6), row(20, 0.48, 0.3, 0.9), row(50, 1.9, 1.2, None, bound="lower", max_fraction=0.0)])
    assert st.established == "<1"
    assert st.assessment.startswith("The gap is established: bos before induction (the fitted interval [0.379, 0.791] "
                                    "excludes 1; 2 of 2 other thresholds give a ratio on the same side)")
    assert st.trust.startswith("the fitted gap. The milestone gap is a lower bound")
    assert "Trust: the milestone" not in st.warning()


def test_the_milestone_bracket_establishes_what_the_fitted_gap_does_not_contradict():
    # OLMo in the study: fitted 11.9 [0.935, 43.9] (p = 0.027), milestone 11.5 [5.09, 26.4]
    st = weigh(story(fitted(11.9, 0.935, 43.9, p=0.027), milestone_dict(11.5, 5.09, 26.4), agree=True),
               [row(10, 9.96, 0.651, 39.4), row(20, 28.6, 3.66, 46.8, head_class="induction")])
    assert st.established == ">1" and st.warning() is None
    assert st.assessment == ("The gap is established: bos after induction (the milestone bracket [5.09, 26.4] excludes 1; "
                             "2 of 2 other thresholds give a ratio on the same side).")


def test_mixed_evidence_is_not_established():
    # the fitted interval excludes 1 above, a threshold's interval excludes it below
    st = weigh(story(fitted(3.0, 1.5, 6.0, p=0.001), None, agree=None), [row(10, 0.4, 0.2, 0.8)])
    assert st.established is None
    assert "bos after induction by the fitted interval, but bos at 10x: 0.4 [0.2, 0.8] excludes 1 on the other side" \
        in st.assessment
    # the fitted interval and the milestone bracket on opposite sides
    st = weigh(story(fitted(3.0, 1.5, 6.0), milestone_dict(0.5, 0.2, 0.8)), [])
    assert st.established is None and "exclude 1 on opposite sides" in st.assessment and st.trust is None
    # a threshold with no head, or with every head at every revision, says nothing
    st = weigh(story(fitted(3.0, 1.5, 6.0), None, agree=None),
               [row(100, 0.1, 0.05, 0.2, max_fraction=0.0), row(5, 0.1, 0.05, 0.2, min_fraction=1.0)])
    assert st.established == ">1"


def test_a_milestone_never_reached_prints_as_a_bound():
    late = Milestone("m", "BOS-50%", "bos", "rule", False, None, None, None, None, last_tokens=4e6)
    early = Milestone("m", "induction formed", "induction", "rule", True, "s2", 2.8e6, "s1", 2e6, 3, 16, 4e6)
    g = milestone_gap(late, early)
    assert g.bound == "lower" and abs(g.ratio - 4e6 / 2.8e6) < 1e-9
    assert describe_milestone_gap(g) == "milestone gap BOS-50% / induction formed >= 1.43x, a bound: BOS-50% not reached by 4M"
    assert g.summary().startswith("m: milestone gap BOS-50% / induction formed >= 1.43x (a lower bound)")
    assert "1.43x [1.43, -]" not in describe_milestone_gap(g) + g.summary()


def test_the_report_prints_bounds_as_bounds_and_opens_each_model_with_a_summary():
    st = weigh(story(fitted(0.6, 0.324, 1.24), milestone_dict(1.67, 1.67, None, "lower")), [])
    curves = [{"model": "m", "class": "induction", "shape": "sharp", "t50": 2.1e6, "t50_ci": [1.9e6, 2.4e6],
               "width_decades": 0.1, "width_is_bound": True, "rise_heads": 4.0, "reason": "-", "censored": None},
              {"model": "m", "class": "bos", "shape": "none", "t50": 4e6, "t50_ci": [4e6, None], "censored": "right",
               "reason": "right-censored: not formed by the last revision"}]
    sens = {"rule": "r", "n_boot": 10, "rows": [
        row(50, 1.9, 1.2, None, bound="lower", max_fraction=0.0).to_dict(),
        row(20, 0.48, 0.25, 1.1).to_dict() | {"censored": "left", "t50": 1e6, "t50_ci": [None, 1e6], "gap_bound": "upper"}]}
    gaps = [{"model": "m", "definition": "fitted", "late_class": "bos", "early_class": "induction", "formation": "t50",
             "t_late": 4e6, "t_early": 2.1e6, "ratio": 1.9, "ratio_ci": [1.2, None], "bound": "lower", "p_value": 0.02,
             "notes": []},
            {"model": "m", "definition": "milestone", "late_milestone": "BOS-50%", "early_milestone": "induction formed",
             "t_late": None, "t_early": 2.8e6, "t_last": 4e6, "ratio": 1.43, "ratio_ci": [1.43, None], "bound": "lower",
             "p_value": None, "notes": []}]
    summary = {"source": {"kind": "heads_csv", "path": "/x/h.csv", "thresholds": {"bos": 30.0}},
               "thresholds": {"bos": 30.0, "induction": 50.0}, "units": {}, "stories": [st.to_dict()], "curves": curves,
               "gaps": gaps, "milestones": [], "sensitivity": sens, "notes": [],
               "findings": {"layer_floor": [], "layer_onset": [], "convergence": []}, "pr_lead": [], "has_pr_data": False}
    text = render_report(summary, {})
    assert "Source: heads_csv, file /x/h.csv." in text and "{'" not in text
    assert "bos 30x, induction 50x (selectivity, x over a uniform head)" in text
    section = text[text.index("### m"):text.index("## Curves")]
    assert section.index("**Summary.**") < section.index("**Disagreement.**") < section.index("Evidence:")
    assert "- induction: **sharp**, t50 ~2.1M [1.9M, 2.4M], 10-90 width <= 0.10 decades, a rise of 4 heads" in section
    assert "- bos: not formed by the last revision (t50 > 4M, right-censored)" in section
    assert "- gap bos / induction: The gap is not established" in section
    assert "| m | bos | 50x | 3/16 (0.0%) | sharp | - | - | not reached | - | - |" in text
    assert "| <= 1M (left-censored) | [-, 1M] | <= 0.48 | [0.25, 1.1] |" in text
    assert "| m | fitted | > 4M (bos t50, right-censored) | 2.1M (induction t50) | >= 1.9 | [1.2, -] | 0.02 | - |" in text
    assert "| m | milestone | > 4M (BOS-50% not reached) | 2.8M (induction formed) | >= 1.43 | [1.43, -] |" in text


def test_the_source_line_of_a_store_is_words():
    line = source_line({"kind": "mlflow", "tracking_uri": "sqlite:///a.db", "experiment": "emergence", "filter": None,
                        "sweep": None, "n_runs": 12, "n_points": 10, "probes": {"toy_neox": "abc123"},
                        "thresholds": {"bos": 30.0}, "units": {"bos": "ratio"}})
    assert line == ("Source: mlflow, store sqlite:///a.db, experiment emergence, 12 runs, 10 points, "
                    "probes (toy_neox: abc123).")


def toy_like_table(path):
    """A toy_neox-like per-head table (16 heads, 10 revisions 0.4M-4M tokens, ratios): three BOS heads at
    40x from 1.2M (one falls back at the last two revisions), four induction heads at 80x from 2.3M; BOS
    forms first and BOS-50 % (8 heads) is never reached."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(3)
    rows = []
    for r, t in enumerate(np.geomspace(0.4e6, 4e6, 10)):
        for h in range(16):
            bos = 40.0 if h in (1, 2, 3) and t >= 1.2e6 and not (h == 3 and r >= 8) else rng.uniform(1, 5)
            ind = 80.0 if h in (8, 9, 10, 11) and t >= 2.3e6 else rng.uniform(1, 5)
            rows.append({"model": "toy", "revision": f"step{r}", "tokens": t, "layer": h // 4, "head": h % 4,
                         "bos": bos * rng.uniform(0.9, 1.1), "induction": ind * rng.uniform(0.9, 1.1)})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_toy_like_study_never_trusts_a_milestone_that_is_never_reached(tmp_path):
    from stats import analyse
    from stats.config import AnalysisConfig, SensitivityConfig
    from stats.sources.heads_csv import read_heads_csv

    study = analyse(read_heads_csv(toy_like_table(tmp_path / "toy.csv")),
                    AnalysisConfig(n_boot=100, progress=False, sensitivity=SensitivityConfig(n_boot=50)))
    (st,) = study.stories
    assert st.milestone["bound"] == "lower"  # BOS-50 % never reached
    assert "milestone gap BOS-50% / induction formed >= " in st.text and "a bound: BOS-50% not reached by 4M" in st.text
    assert st.established != ">1"  # BOS forms first: never "BOS after induction"
    assert not (st.trust or "").startswith("the milestone")
    text = render_report(study.summary(), {})
    assert "Trust: the milestone" not in text
    assert "| toy | bos | 100x | 0/16 (0.0%) | none | - | - | not reached | - | - |" in text
