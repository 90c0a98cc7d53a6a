"""Validation before work in ``python -m stats`` (issue 12, point 3): every option is checked
against its schema's constraints (stats/config.py, walked by emergence/validation.py) and the
options' cross-checks (stats.config.check_config) before any data is read; bad data files
(conflicting duplicate rows) are refused in one line too. Exit status 2, one stderr line.

The bad values come from the schema (tests/test_validation.py builds them), so a new
constrained option is tested without a new line here."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pandas as pd
import pytest

from emergence.validation import constrained_fields
from stats.config import StatsConfig
from test_validation import schema_cases  # tests/test_validation.py (tests/ is on the path)

#: String options that hold free text (URIs, paths, names, filters).
FREE_TEXT = {"source.tracking_uri", "source.experiment", "source.filter", "source.sweep", "source.models",
             "source.status", "source.path", "tracking.uri", "tracking.artifacts", "tracking.experiment",
             "output_dir", "analysis.milestones.rules[0].name"}
#: Options whose valid values depend on other options (checked by stats.config.check_config; cases below).
CROSS_CHECKED = {"analysis.milestones.gap_late", "analysis.milestones.gap_early"}

SCHEMA_CASES = schema_cases(StatsConfig)
LISTED_CASES = [
    (["analysis.pr_lead.column=prr"], ["analysis.pr_lead.column='prr'", "pr, pr_corrected"]),
    (["analysis.changepoint.penalty=bicc"], ["analysis.changepoint.penalty='bicc'", "bic, bic_revisions"]),
    (["analysis.times.formation=t90"], ["analysis.times.formation='t90'", "t50, onset"]),
    (["analysis.treshold=3"], ["analysis.treshold", "thresholds"]),
    (["+analysis.thresholds.bogus=3"], ["analysis.thresholds.bogus", "bos"]),
    (["analysis.n_boot=many"], ["analysis.n_boot=many", "integer"]),
    (["source=nosuch"], ["source=nosuch", "heads_csv"]),
    (["source=csv"], ["source=csv needs source.path"]),
    (["analysis.milestones.gap_late=BOS-99%"], ["analysis.milestones.gap_late='BOS-99%'", "BOS-50%"]),
    (["analysis.milestones.rules=[{name:x,head_class:bos}]"], ["rule 'x'", "exactly one of min_heads, min_fraction"]),
]


@pytest.fixture
def cli(monkeypatch, capsys, tmp_path):
    """Run ``python -m stats ARGS`` in this process; returns (exit status, stderr lines)."""
    from stats.__main__ import cli as entry

    def run(*args):
        argv = [*args, f"hydra.run.dir={tmp_path}/run", f"output_dir={tmp_path}/out", "tracking.log=false",
                "analysis.progress=false", "figures=false", f"source.tracking_uri=sqlite:///{tmp_path}/none.db"]
        monkeypatch.setattr(sys, "argv", ["stats", *argv])
        capsys.readouterr()
        with pytest.raises(SystemExit) as info:
            entry()
        err = capsys.readouterr().err
        assert not (tmp_path / "out").exists()  # nothing written
        return info.value.code, [line for line in err.splitlines() if line.strip()]

    return run


@pytest.mark.parametrize("overrides, shows", SCHEMA_CASES + LISTED_CASES,
                         ids=[" ".join(o) for o, _ in SCHEMA_CASES + LISTED_CASES])
def test_bad_option_is_one_line_and_exit_2(cli, overrides, shows):
    code, lines = cli(*overrides)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("stats: error: ")
    for text in shows:
        assert text in lines[0], (text, lines[0])


def test_every_number_and_choice_has_a_constraint():
    fields = constrained_fields(StatsConfig)
    covered = tuple(f"{path}." for path, _, rule in fields if "items" in rule)  # e.g. analysis.thresholds.*
    nested = {path.split("[0].")[0] for path, _, _ in fields if "[0]." in path}  # lists of dataclasses: walked
    free = []
    for path, tp, rule in fields:
        if (dataclasses.is_dataclass(tp) or tp is bool or path.startswith(covered) or path in CROSS_CHECKED
                or path in nested):
            continue
        if path in FREE_TEXT:
            assert not rule, f"{path} is listed as free text but has a constraint"
        elif not rule:
            free.append(path)
    assert free == [], f"options without a constraint (add one in stats/config.py): {free}"
    assert len(SCHEMA_CASES) > 40


def test_conflicting_duplicate_rows_are_refused_naming_them(cli, tmp_path):
    curves = tmp_path / "curves.csv"
    pd.DataFrame({"model": ["m", "m"], "class": ["bos", "bos"], "tokens": [1e9, 1e9], "k": [3, 5],
                  "n": [64, 64]}).to_csv(curves, index=False)
    code, lines = cli("source=csv", f"source.path={curves}")
    assert code == 2 and len(lines) == 1 and "conflicting" in lines[0] and "'m'" in lines[0], lines
    layers = tmp_path / "layers.csv"  # summing two rows of one layer would count it twice
    pd.DataFrame({"model": ["m"] * 3, "class": ["bos"] * 3, "tokens": [1e9] * 3, "k": [3, 5, 2], "n": [16] * 3,
                  "layer": [0, 0, 1]}).to_csv(layers, index=False)
    code, lines = cli("source=csv", f"source.path={layers}")
    assert code == 2 and len(lines) == 1 and "conflicting duplicate rows" in lines[0] and "1e+09, 0)" in lines[0], lines
    heads = tmp_path / "heads.csv"
    pd.DataFrame({"model": ["m", "m"], "revision": ["step1", "step1"], "tokens": [1e9, 1e9], "layer": [0, 0],
                  "head": [1, 1], "bos": [40.0, 2.0]}).to_csv(heads, index=False)
    code, lines = cli("source=heads_csv", f"source.path={heads}")
    assert code == 2 and len(lines) == 1 and "conflicting duplicate rows" in lines[0] and "'step1', 0, 1" in lines[0]


def test_end_to_end_exit_status_and_one_stderr_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "stats", "analysis.pr_lead.column=prr", f"hydra.run.dir={tmp_path}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["stats: error: analysis.pr_lead.column='prr' is unknown; valid: pr, pr_corrected"]


def test_analyse_as_a_library_checks_its_options():
    from stats.analysis import analyse
    from stats.config import AnalysisConfig, TimesConfig
    from stats.errors import StatsError

    with pytest.raises(StatsError, match=r"^analysis.times.formation='t90' is unknown; valid: t50, onset$"):
        analyse(None, AnalysisConfig(times=TimesConfig(formation="t90")))
