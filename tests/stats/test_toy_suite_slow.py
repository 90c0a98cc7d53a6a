"""End to end (slow): the toy suite's runs, written by ``python -m emergence`` into a
temporary store, analysed by ``python -m stats``: the report with every figure."""

import json
import commands
import sys

import pytest


@pytest.mark.slow
def test_stats_on_the_toy_suite_runs(tmp_path, toy_cache):
    """Reuses the session's toy cache (tests/conftest.py), so toy_neox trains once per test run."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    common = [f"tracking.uri={uri}", f"tracking.artifacts={tmp_path}/mlartifacts"]
    job = commands.run(
        [sys.executable, "-m", "emergence", "model=toy_neox", f"cache.toy_dir={toy_cache}",
         f"hydra.run.dir={tmp_path}/run", *common],
        capture_output=True, text=True, timeout=3000,
    )
    assert job.returncode == 0, job.stderr[-3000:]
    out = tmp_path / "stats"
    proc = commands.run(
        [sys.executable, "-m", "stats", f"source.tracking_uri={uri}", f"hydra.run.dir={out}", "analysis.progress=false", *common],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["curves"]) == 6 and all(c["n_points"] >= 5 for c in summary["curves"])
    figs = summary["figures"]
    # a curve figure for each class with a head flagged at some revision, none for the others
    with_heads = {c["class"] for c in summary["curves"] if max(c["k"]) > 0}
    assert {p.split("curve_toy_neox_")[1][:-4] for p in figs["curves"]} == with_heads
    assert figs["layers"] and figs["timeline"] and figs["continuous"]
    # issue 31: the default toy forms its classes in enough heads for the statistics: a class
    # formed in at least 8 heads gets a verdict without "weak evidence"
    formed = [c for c in summary["curves"] if max(c["k"]) >= 8]
    assert any(c["class"] == "induction" for c in formed), [(c["class"], max(c["k"])) for c in summary["curves"]]
    assert not [c["class"] for c in formed if c.get("strength") == "weak"], [(c["class"], c["shape"]) for c in formed]
    # The trained toy_neox forms induction heads, so the circuit figures are drawn too.
    assert any(c["n_final"] for c in summary["findings"]["convergence"])
    assert figs["convergence"] and figs["pr"]
    report = (out / "report.md").read_text()
    for paths in figs.values():
        for p in paths:
            assert (out / p).is_file() and f"]({p})" in report
