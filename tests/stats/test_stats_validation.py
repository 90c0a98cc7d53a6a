"""Validation before work in ``python -m stats`` (issue 12, point 3): every option is checked
against its schema's constraints (stats/config.py, walked by emergence/common/checks.py) and the
options' cross-checks (stats.config.check_config) before any data is read; bad data files
(conflicting duplicate rows) are refused in one line too. Exit status 2, one stderr line.

The bad values come from the schema (tests/e2e/test_validation.py builds them), so a new
constrained option is tested without a new line here."""

from __future__ import annotations

import dataclasses
import sys

import pandas as pd
import pytest

from emergence.common.checks import constrained_fields
from stats.config import StatsConfig
from test_validation import CLOSED_PORT, case_id, schema_cases  # tests/e2e/test_validation.py (tests/ is on the path)
import commands

pytestmark = pytest.mark.cli

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
    (["analysis.thresholds.induktion=3"], ["analysis.thresholds.induktion is not a key of analysis.thresholds",
                                           "valid: induction"]),
    (["analysis.n_boot=10000000000000"], ["analysis.n_boot=10000000000000", "<= 100000"]),
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
        defaults = {"hydra.run.dir": f"{tmp_path}/run", "output_dir": f"{tmp_path}/out", "tracking.log": "false",
                    "analysis.progress": "false", "figures.enabled": "false",
                    "source.tracking_uri": f"sqlite:///{tmp_path}/none.db"}
        given = {a.split("=", 1)[0] for a in args}
        argv = [*args, *(f"{k}={v}" for k, v in defaults.items() if k not in given)]
        monkeypatch.setattr(sys, "argv", ["stats", *argv])
        capsys.readouterr()
        with pytest.raises(SystemExit) as info:
            entry()
        err = capsys.readouterr().err
        assert not (tmp_path / "out").exists()  # nothing written
        assert not (tmp_path / "run").exists()  # not even Hydra's log of the refused run
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


HEAD_COLUMNS = "model,revision,tokens,layer,head,bos,induction\n"
#: Impossible values in the files ``stats`` reads (issue 23, point 7): (source, file text, texts the line shows).
BAD_DATA_CASES = [
    ("heads_csv", HEAD_COLUMNS + "m,step1,1000,0,0,1.0,2.0\nm,step1,1000,0,1,nan,2.0\n",
     ["column 'bos' row 1: 'nan' is not a number", "layer 0, head 1"]),
    ("heads_csv", HEAD_COLUMNS + "m,step1,1000,0,0,1.0,2.0\nm,step1,1000,0,1,NaN,2.0\n", ["column 'bos' row 1: 'NaN'"]),
    ("heads_csv", HEAD_COLUMNS + "m,step1,1000,0,0,1.0,inf\n", ["column 'induction' row 0: inf is not finite"]),
    ("heads_csv", HEAD_COLUMNS + "m,step1,1000,0,0,-inf,1.0\n", ["column 'bos' row 0: -inf is negative"]),
    ("heads_csv", HEAD_COLUMNS + "m,step1,1000,0,0,1.0,2.0\nm,step1,1000,0,1,-3.5,2.0\n",
     ["column 'bos' row 1: -3.5 is negative", "a finite number >= 0"]),
    ("heads_csv", HEAD_COLUMNS + "m,step1,-1000,0,0,1.0,2.0\n", ["column 'tokens' row 0: -1000 is not a token count",
                                                                "revision 'step1'"]),
    ("heads_csv", HEAD_COLUMNS + "m,step1,inf,0,0,1.0,2.0\n", ["column 'tokens' row 0: inf is not a token count"]),
    ("csv", "model,class,tokens,k,n\nm,bos,1000,1,16\nm,bos,-2000,3,16\n",
     ["column 'tokens' row 1: -2000", "not a token count"]),
    ("csv", "model,class,tokens,k,n\nm,bos,1000,1.5,16\n", ["column 'k' row 0: 1.5 is not a count"]),
    ("csv", "model,class,tokens,k,n\nm,bos,1000,1,inf\n", ["column 'n' row 0: inf is not a count"]),
    ("csv", "model,class,tokens,k,n\nm,bos,1000,1,16\nm,bos,2000,20,16\n", ["column 'k' row 1: k=20 > n=16"]),
    ("csv", "model,class,tokens,k,n\nm,bos,1000,nan,16\n", ["column 'k' row 0: 'nan' is not a number"]),
    # issue 34, point 3: class names against the head-class registry
    ("csv", "model,class,tokens,k,n\nm,bos,1000,1,16\nm,induktion,1000,1,16\n",
     ["column 'class' row 1: 'induktion' is not a head class", "valid: induction, previous_token"]),
    ("heads_csv", "model,revision,tokens,layer,head,bso,induction\nm,step1,1000,0,0,1.0,2.0\n",
     ["column 'bso' is not a head class (did you mean 'bos'?)", "valid class columns: induction"]),
    ("heads_csv", "model,revision,tokens,layer,head,selectivity.induktion\nm,step1,1000,0,0,1.0\n",
     ["column 'selectivity.induktion' is not a head class"]),
]


@pytest.mark.parametrize("source, text, shows", BAD_DATA_CASES, ids=[t.splitlines()[-1] for _, t, _ in BAD_DATA_CASES])
def test_impossible_values_are_one_line_naming_file_row_and_column(cli, tmp_path, source, text, shows):
    """NaN (written out), infinite and negative selectivities and negative token counts were taken
    silently (a negative-token revision left the fits without a word); each is one line, exit 2."""
    path = tmp_path / "data.csv"
    path.write_text(text)
    code, lines = cli(f"source={source}", f"source.path={path}")
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("stats: error: ") and str(path) in lines[0], lines[0]
    for shown in shows:
        assert shown in lines[0], (shown, lines[0])


def test_an_empty_selectivity_is_not_measured_and_a_run_may_hold_inf():
    """What stays accepted: an empty cell (not measured) in a file, and +inf in a run's own heads.csv
    (the screen writes it for a head whose baseline keys got no attention mass)."""
    from stats.heads import normalise_heads

    df = pd.DataFrame({"model": ["m", "m"], "revision": ["s", "s"], "tokens": [1e3, 1e3], "layer": [0, 0],
                       "head": [0, 1], "bos": [float("nan"), float("inf")]})
    heads, _ = normalise_heads(df, "heads.csv of the runs", allow_inf=True)
    assert heads["selectivity.bos"].isna().iloc[0] and heads["selectivity.bos"].iloc[1] == float("inf")
    from stats.errors import StatsError

    with pytest.raises(StatsError, match="inf is not finite"):
        normalise_heads(df, "a file")


URI_CASES = [
    (["source.tracking_uri=garbage:///"], ["source.tracking_uri='garbage:///' has an unknown scheme 'garbage'"]),
    ([f"source.tracking_uri=http://127.0.0.1:{CLOSED_PORT}"], ["source.tracking_uri=", "cannot be reached"]),
    (["source=xu2026", "tracking.log=true", "tracking.uri=garbage:///"], ["tracking.uri='garbage:///' has an unknown"]),
]


@pytest.mark.parametrize("overrides, shows", URI_CASES, ids=[case_id(o) for o, _ in URI_CASES])
def test_a_bad_store_is_one_line_before_anything_is_read(cli, overrides, shows):
    code, lines = cli(*overrides)
    assert code == 2 and len(lines) == 1, lines
    for shown in shows:
        assert shown in lines[0], (shown, lines[0])


def test_a_malformed_sqlite_store_is_one_line(cli, tmp_path):
    """A store file that is not a SQLite database (damaged, or another file): one line, exit 2,
    not SQLAlchemy's traceback; the file is left as it was."""
    bad = tmp_path / "mlflow.db"
    bad.write_bytes(b"not a database, " * 300)
    code, lines = cli(f"source.tracking_uri=sqlite:///{bad}")
    assert code == 2 and len(lines) == 1, lines
    assert "is not a SQLite database" in lines[0] and str(bad) in lines[0]
    assert bad.read_bytes() == b"not a database, " * 300


def test_hydra_logs_go_with_output_dir_not_to_outputs(tmp_path, monkeypatch, capsys):
    """``stats output_dir=X`` keeps Hydra's record of the run in X, so nothing lands in ./outputs."""
    from stats.__main__ import cli as entry

    curves = tmp_path / "curves.csv"
    pd.DataFrame({"model": ["m"] * 5, "class": ["bos"] * 5, "tokens": [1e3, 1e4, 1e5, 1e6, 1e7],
                  "k": [0, 1, 8, 15, 16], "n": [16] * 5}).to_csv(curves, index=False)
    monkeypatch.setenv("EMERGENCE_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["stats", "source=csv", f"source.path={curves}", f"output_dir={tmp_path}/out",
                                      "tracking.log=false", "figures.enabled=false", "analysis.n_boot=20",
                                      "analysis.shape.n_perm=99", "analysis.progress=false"])
    entry()
    assert (tmp_path / "out" / "summary.json").is_file() and (tmp_path / "out" / ".hydra").is_dir()
    assert not (tmp_path / "outputs").exists()


def test_a_file_analysis_writes_no_store_and_counts_empty_cells(tmp_path, monkeypatch, capsys):
    """Issue 34, point 3: ``python -m stats source=heads_csv`` (a file) creates no MLflow store unless
    ``tracking.log=true``, and says how many cells of each class column were empty, per model."""
    from stats.__main__ import cli as entry

    rows = [{"model": "m", "revision": f"step{i}", "tokens": 10.0 ** (i + 3), "layer": 0, "head": h,
             "bos": 40.0 * (i >= 2) + 1.0, "induction": 30.0 * (i >= 3) + 1.0} for i in range(6) for h in range(4)]
    heads = pd.DataFrame(rows)
    heads.loc[[1, 5, 9], "bos"] = float("nan")  # three cells not measured
    path = tmp_path / "heads.csv"
    heads.to_csv(path, index=False, na_rep="")
    monkeypatch.setenv("EMERGENCE_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["stats", "source=heads_csv", f"source.path={path}", "figures.enabled=false",
                                      "analysis.n_boot=20", "analysis.shape.n_perm=99", "analysis.progress=false"])
    capsys.readouterr()
    entry()
    out = capsys.readouterr()
    assert "empty cells read as not measured: bos: 3 of 24 (m)" in out.err, out.err
    assert "mlflow run" not in out.out
    assert not list(tmp_path.rglob("*.db")) and not list(tmp_path.rglob("mlartifacts"))


def test_end_to_end_exit_status_and_one_stderr_line(tmp_path):
    proc = commands.run([sys.executable, "-m", "stats", "analysis.pr_lead.column=prr", f"hydra.run.dir={tmp_path}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["stats: error: analysis.pr_lead.column='prr' is unknown; valid: pr, pr_corrected"]


def test_analyse_as_a_library_checks_its_options():
    from stats.analysis import analyse
    from stats.config import AnalysisConfig, TimesConfig
    from stats.errors import StatsError

    with pytest.raises(StatsError, match=r"^analysis.times.formation='t90' is unknown; valid: t50, onset$"):
        analyse(None, AnalysisConfig(times=TimesConfig(formation="t90")))
