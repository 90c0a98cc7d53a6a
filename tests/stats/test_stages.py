"""The stages' results objects (to_dict derived from the fields, summary() as text), the source
registry, and the rules that live once in the schema."""

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

from stats.analysis import StudySummary, analyse
from stats.config import AnalysisConfig, SensitivityConfig, ShapeConfig, SourceConfig, check_options
from stats.curve_analysis import RECORD, analyse_curve
from stats.errors import StatsError
from stats.results import Results, json_safe
from stats.sources import Source, get, kinds, read_source, register, unregister
from stats.tracked import Curve, TrackedResults

TOK = np.logspace(9, 12, 10)


@dataclass
class _Example(Results):
    RENAME = {"head_class": "class"}
    EXCLUDE = ("draws",)

    model: str
    head_class: str
    draws: list = field(default_factory=list)
    total: int = field(init=False)

    def __post_init__(self):
        self.total = len(self.draws)


def test_a_record_is_its_fields_renamed_less_the_excluded_ones():
    rec = _Example("m", "bos", [1, 2, 3]).to_dict()
    assert rec == {"model": "m", "class": "bos", "total": 3}
    assert list(rec) == ["model", "class", "total"]
    assert "model: m" in _Example("m", "bos").summary()


def test_json_safe_writes_an_array_through_its_python_values():
    dates = np.array(["2026-01-02", "2026-03-04"], dtype="datetime64[D]")
    out = json_safe({"dates": dates, "x": np.array([1.5, np.nan, np.inf]), "n": np.arange(2)})
    assert out == {"dates": dates.tolist(), "x": [1.5, None, None], "n": [0, 1]}
    assert [type(v) for v in out["dates"] + out["n"]] == [type(v) for v in dates.tolist()] + [int, int]


def curve(k, n=64.0, identity=False):
    return Curve("m", "bos", np.array([f"r{i}" for i in range(len(k))]), TOK[: len(k)], np.asarray(k, float),
                 np.full(len(k), n), identity=identity)


def test_the_curve_record_holds_every_entry_of_its_layout_in_order():
    ca = analyse_curve(curve([0, 0, 1, 2, 10, 30, 31, 32, 32, 33]), AnalysisConfig(n_boot=50, progress=False),
                       np.random.default_rng(0))
    d = ca.to_dict()
    assert tuple(d) == RECORD
    assert d["class"] == "bos" and d["shape"] == ca.verdict.shape and d["n_points"] == 10
    assert d["t50"] == ca.times.t50 and d["p_step"] == ca.step_test.p_value
    assert ca.summary().startswith("m / bos: ")
    assert ca.head_class == "bos"


def test_the_study_summary_is_the_record_and_prints_as_text():
    rows = [{"model": "m", "pretraining_corpus": "x", "class": c, "revision": f"r{i}", "tokens": t, "k": k, "n": 64.0}
            for c, ks in (("bos", [0, 0, 0, 1, 5, 20, 40, 50, 52, 53]), ("induction", [0, 2, 6, 9, 10, 10, 11, 11, 11, 11]))
            for i, (t, k) in enumerate(zip(TOK, ks))]
    results = TrackedResults(pd.DataFrame(rows), pd.DataFrame(columns=["model", "class", "revision", "tokens", "layer",
                                                                       "k", "n"]))
    study = analyse(results, AnalysisConfig(n_boot=50, progress=False, sensitivity=SensitivityConfig(enabled=False)))
    summary = study.summary()
    assert isinstance(summary, StudySummary) and summary == study.to_dict()
    assert list(summary) == ["source", "notes", "thresholds", "units", "reproduction", "stories", "curves", "gaps", "pooled_gaps",
                             "milestones", "sensitivity", "findings", "pr_lead", "has_pr_data"]
    text = str(summary)
    assert "m / bos: " in text and "m / induction: " in text and text == summary.as_text()


def test_the_source_kinds_are_the_registry_s_in_order_and_check_their_own_settings():
    assert kinds() == ("mlflow", "csv", "heads_csv")
    with pytest.raises(StatsError, match=r"^source=csv needs source.path=FILE$"):
        read_source(SourceConfig(kind="csv"))
    with pytest.raises(StatsError, match=r"^source.tracking_uri is empty"):
        get("mlflow").check(SourceConfig(kind="mlflow", tracking_uri=None))
    with pytest.raises(StatsError, match=r"unknown source.kind 'nope'; valid: mlflow, csv, heads_csv"):
        get("nope")


def test_a_registered_source_is_a_valid_kind_and_is_read():
    from omegaconf import OmegaConf

    from stats.config import StatsConfig, check_config

    frame = pd.DataFrame(columns=["model", "pretraining_corpus", "class", "revision", "tokens", "k", "n"])
    own = Source("own", lambda src: TrackedResults(frame, frame.copy(), source={"kind": "own"}), order=5)
    node = OmegaConf.merge(OmegaConf.structured(StatsConfig), {"source": {"kind": "own"}, "tracking": {"uri": "x"},
                                                               "output_dir": "/tmp/o"})
    with pytest.raises(StatsError, match="source.kind='own' is unknown; valid: mlflow, csv, heads_csv"):
        check_config(node)
    register(own)
    try:
        assert kinds()[-1] == "own"
        check_config(node)
        assert read_source(SourceConfig(kind="own")).source == {"kind": "own"}
    finally:
        unregister("own")


def test_an_options_object_is_checked_against_its_schema():
    with pytest.raises(StatsError, match=r"^analysis\.shape\.sharp_width_decades=-1\.0: must be a finite number > 0$"):
        check_options(ShapeConfig(sharp_width_decades=-1.0), "analysis.shape.")
    with pytest.raises(StatsError, match=r"^analysis\.shape\.regime='odd': valid: \['auto', 'identity', 'aggregate'\]$"):
        check_options(ShapeConfig(regime="odd"), "analysis.shape.")
    check_options(ShapeConfig(), "analysis.shape.")


def test_the_auto_regime_follows_the_heads():
    assert curve([0] * 10).regime == "aggregate" and curve([0] * 10, identity=True).regime == "identity"
