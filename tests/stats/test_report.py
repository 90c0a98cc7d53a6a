"""Outputs on degenerate input: every figure still written, no crash."""

import json

import numpy as np
import pandas as pd

from stats import analyse, read_csv
from stats.config import AnalysisConfig
from stats.report import render_report, write_outputs


def test_all_flat_or_short_curves_still_give_every_output(tmp_path):
    rows = [{"model": "flat", "class": "bos", "tokens": t, "k": 0, "n": 64} for t in np.logspace(9, 12, 8)]
    rows += [{"model": "flat", "class": "induction", "tokens": t, "k": 3, "n": 64} for t in np.logspace(9, 12, 8)]
    rows += [{"model": "short", "class": "bos", "tokens": t, "k": k, "n": 16} for t, k in ((1e9, 0), (1e10, 8))]
    rows += [{"model": "short", "class": "bos", "tokens": 0, "k": 0, "n": 16, "revision": "step0"}]
    rows += [{"model": "flat", "class": "bos", "tokens": 1e10, "k": 0, "n": 8, "layer": layer} for layer in range(8)]
    path = tmp_path / "c.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    analysis = analyse(read_csv(path), AnalysisConfig(n_boot=50, progress=False))
    assert {c.verdict.shape for c in analysis.curves} == {"none"}
    out = write_outputs(analysis, tmp_path / "out")
    summary = json.loads(out["summary"].read_text())
    assert summary["figures"]["timeline"] and (tmp_path / "out" / summary["figures"]["timeline"][0]).is_file()
    assert len(summary["figures"]["curves"]) == 2  # flat / bos has no head at any revision: no curve figure
    gap = summary["gaps"][0]
    # bos flat at zero: not formed by the last revision (right-censored); induction flat at 3 of 64 heads, below the
    # background floor of aggregate counts: no side; no ratio either way
    assert {c["class"]: c["censored"] for c in summary["curves"] if c["model"] == "flat"} == {"bos": "right",
                                                                                            "induction": None}
    assert gap["ratio"] is None and "no ratio" in gap["notes"][0]
    text = out["report"].read_text()
    assert "No PR data" in text and "flat / bos: none" in text


def test_report_lists_every_curve_and_gap(reference_csv):
    analysis = analyse(read_csv(reference_csv), AnalysisConfig(n_boot=100, progress=False))
    text = render_report(analysis.summary(), {})
    for c in analysis.curves:
        assert f"| {c.model} | {c.head_class} | **{c.verdict.shape}**" in text
    for g in analysis.gaps:
        assert f"| {g.model} |" in text


def test_a_width_without_an_upper_limit_prints_as_a_lower_bound():
    """A rise that may go on outside the range has no upper limit (null in summary.json): the table
    and the summary line print what the data bound, never the fitted width as if it were measured."""
    from stats.report import _width_cell

    assert _width_cell({"width_lower": 0.81, "width_upper": None, "width_decades": 1.2}) == ">= 0.81"
    assert _width_cell({"width_lower": 0.0, "width_upper": None, "width_decades": 0.13}) == "-"
    assert _width_cell({"width_lower": 0.81, "width_upper": 1.63, "width_decades": 1.2}) == "0.81 to 1.63"
    assert _width_cell({"width_lower": 0.0, "width_upper": 0.26}) == "<= 0.26"
