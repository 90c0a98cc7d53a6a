"""Metrics in their own units (issue 33, point 5): a per-head column is a ratio over a uniform head
(``x``) or a score / mass in [0, 1]; the unit is declared (``source.units.<class>``) or read from the
values, carried into the results, written in every table and refused where a threshold lies outside it.

The case of the issue: another lab's per-head table of prefix-matching scores (induction) and
first-token attention masses (bos), values in [0, 1], thresholds 0.4 and 0.5, nine seeds per size,
read as a seed suite; BOS-50 % is never reached (6 of 16 heads), so its milestone is a bound."""

from __future__ import annotations

import re
import commands
import sys

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from stats import analyse
from stats.config import AnalysisConfig, SensitivityConfig, StatsConfig, ThresholdsConfig, check_config
from stats.errors import StatsError
from stats.heads import with_units
from stats.report import render_report
from stats.sources.heads_csv import read_heads_csv
from stats.units import RATIO, SCORE, detect_unit, format_threshold, threshold_problem

INDUCTION_HEADS, BOS_HEADS = (5, 6, 9), (2, 3, 7, 10, 11, 14)


def score_table(path, seeds=9, revisions=10, rng_seed=0):
    """Prefix-matching scores and first-token masses of 16 heads, in [0, 1]: three induction heads go
    from ~0.05 to ~0.85 and six bos heads from ~0.1 to ~0.9, the bos ones a decade after; nine seeds
    for each of two sizes (``seed`` column: a seed suite)."""
    rng = np.random.default_rng(rng_seed)
    tokens = np.logspace(7, 10, revisions)
    rows = []
    for size, t_ind, t_bos in (("small", 1e8, 1e9), ("large", 2e8, 2e9)):
        for seed in range(seeds):
            ti, tb = t_ind * 10 ** rng.normal(0, 0.1), t_bos * 10 ** rng.normal(0, 0.1)
            for r, t in enumerate(tokens):
                for h in range(16):
                    ind = 0.05 + (0.8 if h in INDUCTION_HEADS and t >= ti else 0.0) + rng.uniform(0, 0.05)
                    bos = 0.1 + (0.8 if h in BOS_HEADS and t >= tb else 0.0) + rng.uniform(0, 0.05)
                    rows.append({"model": size, "seed": seed, "revision": f"step{r}", "tokens": t, "layer": h // 4,
                                 "head": h % 4, "induction": ind, "bos": bos})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    return score_table(tmp_path_factory.mktemp("scores") / "scores.csv")


@pytest.fixture(scope="module")
def score_study(scores):
    cfg = AnalysisConfig(n_boot=30, progress=False, thresholds=ThresholdsConfig(induction=0.4, bos=0.5),
                         sensitivity=SensitivityConfig(n_boot=10, score_grid=[0.3, 0.5, 0.7]))
    return analyse(read_heads_csv(scores), cfg)


def test_units_known_answers():
    assert detect_unit([0.0, 0.4, 1.0, np.nan]) is SCORE and detect_unit([0.2, 1.5]) is RATIO and detect_unit([]) is RATIO
    assert format_threshold(30) == "30x" and format_threshold(0.4, "score") == "0.4" and format_threshold(50, "ratio") == "50x"
    assert threshold_problem("analysis.thresholds.bos", 0.5, "bos", "score") is None
    assert threshold_problem("analysis.thresholds.bos", 30, "bos", "ratio") is None
    line = threshold_problem("analysis.thresholds.bos", 30.0, "bos", "score")
    assert line.startswith("analysis.thresholds.bos=30.0: outside the range of bos's values, a score or mass in [0, 1]")
    assert "in (0, 1]" in line and "\n" not in line


def test_a_score_table_is_read_as_scores_and_a_run_table_as_ratios(scores):
    results = read_heads_csv(scores)
    assert results.source["units"] == {"induction": "score", "bos": "score"}
    assert any("read as a score" in n for n in results.notes)
    assert len(results.seed_groups()) == 2 and all(len(v) == 9 for v in results.seed_groups().values())
    # a run's heads.csv holds selectivities: the source's own unit wins over the values
    assert with_units(results, None, default="ratio").source["units"] == {"induction": "ratio", "bos": "ratio"}
    # a declared unit wins over both
    assert with_units(results, {"bos": "ratio", "induction": "auto"}).source["units"] == {"induction": "score", "bos": "ratio"}


def test_a_threshold_outside_a_score_range_is_refused_in_one_line(scores):
    with pytest.raises(StatsError) as err:  # the default thresholds are ratios: 50x induction
        analyse(read_heads_csv(scores), AnalysisConfig(n_boot=5, progress=False))
    msg = str(err.value)
    assert msg.startswith("analysis.thresholds.induction=50.0: outside the range of induction's values, a score")
    assert "every per-head value lies in [0, 1]" in msg and "\n" not in msg
    # a milestone rule's own threshold too
    cfg = AnalysisConfig(n_boot=5, progress=False, thresholds=ThresholdsConfig(induction=0.4, bos=0.5))
    cfg.milestones.rules[1].threshold = 30.0
    with pytest.raises(StatsError, match=r"^analysis.milestones rule 'BOS-10%': threshold=30.0: outside the range"):
        analyse(read_heads_csv(scores), cfg)


def test_a_declared_unit_refuses_its_threshold_before_anything_is_read(tmp_path):
    cfg = OmegaConf.merge(OmegaConf.structured(StatsConfig), {
        "source": {"kind": "heads_csv", "path": str(tmp_path / "absent.csv"), "units": {"bos": "score"}},
        "tracking": {"uri": "sqlite:///x.db"}, "output_dir": str(tmp_path)})
    with pytest.raises(StatsError, match=r"^analysis.thresholds.bos=30.0: .*\(source.units.bos=score\); a score "
                                         r"threshold must be in \(0, 1\]$"):
        check_config(cfg)
    cfg.analysis.thresholds.bos = 0.5
    check_config(cfg)  # in range: accepted (the file is read later)


@pytest.mark.cli
def test_the_command_line_refuses_a_threshold_out_of_its_unit_with_exit_2(tmp_path):
    proc = commands.run([sys.executable, "-m", "stats", "source=heads_csv", f"source.path={tmp_path / 'none.csv'}",
                           "source.units.induction=score", f"output_dir={tmp_path / 'out'}", "tracking.log=false"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines == [lines[0]] and "analysis.thresholds.induction=50.0: outside the range" in lines[0]
    assert "source.units.induction=score" in lines[0]


def test_the_report_writes_scores_as_scores_and_bounds_as_bounds(score_study):
    summary = score_study.summary()
    assert summary["units"]["induction"]["unit"] == "score" and summary["units"]["bos"]["suffix"] == ""
    text = render_report(summary, {})
    assert "Thresholds, applied at analysis time to the per-head values (a head is flagged at or above): " \
           "induction 0.4, bos 0.5 (score or mass in [0, 1])." in text
    assert not re.search(r"(?<![\d.])0\.\d+x", text), re.findall(r".{40}(?<![\d.])0\.\d+x.{10}", text)[:3]
    assert "first revision with >= 3 induction heads at >= 0.4 |" in text
    assert "first revision with bos fraction >= 50% at >= 0.5 |" in text
    # the sensitivity table: the score grid, in the score's terms
    rows = summary["sensitivity"]["rows"]
    assert {r["threshold"] for r in rows} == {0.3, 0.5, 0.7} and {r["unit"] for r in rows} == {"score"}
    assert "| bos | 0.5 * |" in text and "| induction | 0.7 |" in text
    # circuit convergence: the ratio thresholds (30x, 50x) are left out with a note, the analysis one kept
    assert {c.threshold for c in score_study.convergence} == {0.4}
    assert any("convergence_thresholds [30.0, 50.0] lie outside" in n for n in summary["notes"])
    # BOS-50 % is never reached (6 of 16 heads): every milestone gap is a bound, never a point
    m_gaps = [g for g in summary["gaps"] if g["definition"] == "milestone"]
    assert len(m_gaps) == 18 and all(g["bound"] == "lower" for g in m_gaps)
    for st in summary["stories"]:
        assert re.search(r"milestone gap BOS-50% / induction formed >= [\d.]+x, a bound: BOS-50% not reached by", st["text"])
    assert not re.search(r"milestone gap BOS-50% / induction formed [\d.]+x \[", text)
    assert re.search(r"\| > 10B \(BOS-50% not reached\) \|", text)  # the gaps table's t(late)
    # a seed suite: two groups of nine runs, pooled
    assert [(g["model"], g["n_seeds"]) for g in summary["pooled_gaps"]] == [("large", 9), ("small", 9)]


def test_auto_reads_the_table_as_a_whole_so_a_class_no_head_shows_stays_a_ratio():
    from stats.heads import resolve_units

    heads = pd.DataFrame({"model": "m", "revision": "r", "tokens": 1e9, "layer": 0, "head": [0, 1],
                          "selectivity.bos": [0.5, 40.0], "selectivity.previous_token": [0.3, 0.9]})
    assert resolve_units(heads) == {"previous_token": "ratio", "bos": "ratio"}  # one value above 1: ratios
    scores = heads.assign(**{"selectivity.bos": [0.5, 0.95]})
    assert resolve_units(scores) == {"previous_token": "score", "bos": "score"}
    assert resolve_units(scores, {"bos": "ratio"}) == {"previous_token": "score", "bos": "ratio"}
    assert resolve_units(scores, default="ratio") == {"previous_token": "ratio", "bos": "ratio"}
