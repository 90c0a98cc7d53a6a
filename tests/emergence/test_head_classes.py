"""The head-class registry (emergence/common/head_classes/): the six built-in classes, and a
seventh added through the registry alone (``register``), as docs/head_classes.md shows:
the reducer computes it (against a naive loop), the flags, metrics and config defaults
include it, and the stats reader finds its curve."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

import forced_attention as fa
from tiny_models import save_revisions, tiny_model
from emergence.common import contract as C
from emergence.common import head_classes
from emergence.adapters import adapter_for
from emergence.config import HEAD_CLASSES, ScreenConfig
from emergence.common.head_classes import HeadClass
from emergence.probes import synthetic_induction
from emergence.screens import screen


def skip_one_targets(input_ids, settings):
    """The key two before the query: T(q) = q-2 (q >= 3 once key 0 is left out)."""
    T = input_ids.shape[1]
    return torch.ones(T, T, dtype=torch.bool).tril(-2).triu(-2)[None]


SKIP_ONE = HeadClass(name="skip_one", threshold=30.0, excludes_key0=True, targets=skip_one_targets,
                     description="q-2")


@pytest.fixture
def skip_one():
    head_classes.register(SKIP_ONE)
    yield SKIP_ONE
    head_classes.unregister("skip_one")


def probe(n_sequences=12, n=9, batch_size=5):
    return synthetic_induction(range(1, 90), n_sequences, n, first_token=0, seed=0, batch_size=batch_size)


def test_the_builtin_classes_and_their_defaults():
    builtin = {"induction": 50.0, "previous_token": 30.0, "duplicate_token": 30.0, "bos": 30.0, "self": 30.0,
               "local": 10.0}
    assert HEAD_CLASSES[:6] == tuple(builtin)  # discovered from the package's files, in their order
    assert {c: head_classes.get(c).threshold for c in builtin} == builtin
    assert [c for c in builtin if not head_classes.get(c).excludes_key0] == ["bos"]
    assert dict(ScreenConfig().thresholds) == head_classes.default_thresholds()


def test_register_refuses_bad_classes():
    with pytest.raises(ValueError, match="must match"):
        head_classes.register(HeadClass("skip.one", 30.0, True, skip_one_targets))
    with pytest.raises(ValueError, match="must be > 0"):
        head_classes.register(HeadClass("skip_one", 0.0, True, skip_one_targets))
    with pytest.raises(ValueError, match="registered already"):
        head_classes.register(HeadClass("bos", 30.0, False, skip_one_targets))
    assert "skip_one" not in head_classes.names()


def naive_selectivity(A, targets, excludes_key0=True):
    """METHODS' S_c for one head from its batch-averaged attention A [T, T], in loops."""
    num = den = 0.0
    T = A.shape[0]
    for q in range(T):
        tgt = [k for k in targets(q) if 0 <= k <= q and not (excludes_key0 and k == 0)]
        base = [k for k in range(q + 1) if k not in tgt and not (excludes_key0 and k == 0)]
        if not tgt or not base:
            continue
        num += float(A[q, tgt].mean())
        den += float(A[q, base].mean())
    return num / den


def test_a_seventh_class_is_screened_flagged_and_counted(skip_one):
    model = tiny_model("gpt_neox", seed=3)
    p = probe()
    cfg = OmegaConf.structured(ScreenConfig())
    assert cfg.thresholds["skip_one"] == 30.0  # the config default comes from the registry
    result = screen(model, adapter_for(model), p, cfg, progress=False)
    with torch.no_grad():
        atts = model(p.input_ids, output_attentions=True).attentions
    table = result.heads.set_index(["layer", "head"])
    for layer, att in enumerate(atts):
        A = att.mean(0).double()  # the synthetic probe: one set of targets, batch-averaged A
        for h in range(A.shape[0]):
            expected = naive_selectivity(A[h], lambda q: [q - 2])
            assert table.loc[(layer, h), C.selectivity_column("skip_one")] == pytest.approx(expected, rel=1e-6)
    assert C.flag_column("skip_one") in result.heads.columns
    for name in (C.count_metric("skip_one"), C.fraction_metric("skip_one"), C.mean_selectivity_metric("skip_one"),
                 C.layer_count_metric(3, "skip_one")):
        assert name in result.metrics, name


def test_a_forced_skip_one_head_is_flagged_as_such(skip_one, monkeypatch):
    plain = fa.pattern_weights

    def pattern_weights(name, T, sharpness=1.0):
        if name != "skip":
            return plain(name, T, sharpness)
        W = torch.zeros(T, T)
        for q in range(T):
            W[q, max(q - 2, 0)] = 1
        return sharpness * W + (1 - sharpness) * plain("uniform", T)

    monkeypatch.setattr(fa, "pattern_weights", pattern_weights)
    model = tiny_model("olmo")
    with fa.forced_attention({(1, 2): "skip", (2, 0): "previous"}, sharpness=0.9):
        result = screen(model, adapter_for(model), probe(n_sequences=20), OmegaConf.structured(ScreenConfig()),
                        progress=False)
    table = result.heads.set_index(["layer", "head"])
    # q-2 is in the local window too (q-4 .. q-2, threshold 10x), so the head is flagged for
    # both and its primary class is the larger ratio S / threshold; skip_one is far more selective.
    assert table.loc[(1, 2), C.flag_column("skip_one")] == 1
    assert table.loc[(1, 2), C.selectivity_column("skip_one")] > 2 * table.loc[(1, 2), C.selectivity_column("local")]
    assert table.loc[(2, 0), C.PRIMARY_COLUMN] == "previous_token"
    assert result.metrics[C.count_metric("skip_one")] == 1
    assert result.metrics[C.layer_count_metric(1, "skip_one")] == 1


@pytest.mark.store
def test_the_stats_reader_finds_the_seventh_class(skip_one, tmp_path):
    from emergence.job import run_job
    from emergence.catalog import compose
    from stats.sources.mlflow import read_mlflow
    from stats.heads import apply_thresholds, thresholds_dict

    folder = save_revisions(tmp_path / "ckpt", "gpt_neox", steps=(10, 100))
    store = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = compose(["model=pythia_70m", "model.name=tiny", f"model.path={folder}", "model.repo=null",
                   "model.revisions=folder", "revision=all", "corpus.n_sequences=12", "corpus.segment_length=8",
                   f"tracking.uri={store}", f"tracking.artifacts={tmp_path}/art", "tracking.experiment=seven"])
    run_job(cfg, progress=False)
    got = read_mlflow(store, "seven")
    assert got.classes("tiny")[-1] == "skip_one"
    assert len(got.curve("tiny", "skip_one")) == 2
    assert thresholds_dict()["skip_one"] == 30.0
    rethresholded = apply_thresholds(got, {"skip_one": 1.0})  # re-read from heads.csv at another threshold
    assert len(rethresholded.curve("tiny", "skip_one")) == 2
    assert not any("skip_one" in n for n in rethresholded.notes)


def test_the_reference_recipe_measures_the_seventh_class_at_the_last_query(skip_one):
    """screen.recipe=xu2026 keeps the study's own targets for its six classes and measures
    any other class from the class's targets in the last row: here a[n, T-1, T-3]."""
    import numpy as np

    from emergence.probes import build_probe
    from emergence.catalog import compose
    from emergence.screens.xu2026 import baseline_positions

    model = tiny_model("gpt_neox", vocab_size=128, max_positions=64, seed=2)
    cfg = compose(["model=toy_neox", "corpus=xu2026", "screen=xu2026", "corpus.vocab_lo=1", "corpus.vocab_hi=128",
                   "corpus.seq_len=64", "corpus.n_sequences=20", "corpus.batch_size=8", "screen.ablation=null",
                   "screen.participation_ratio=false"])
    p = build_probe(cfg.corpus, model.config)
    result = screen(model, adapter_for(model), p, cfg.screen, progress=False)
    with torch.no_grad():
        atts = model(p.input_ids, output_attentions=True).attentions
    T = p.seq_len
    base = torch.from_numpy(baseline_positions(T))
    for layer, att in enumerate(atts):
        a = att[:, :, -1, :].double()  # [N, H, T]: the last query
        expected = a[..., T - 3].mean(0) / a[..., base].mean(-1).mean(0).clamp(min=1e-8)
        got = result.heads.loc[result.heads["layer"] == layer, C.selectivity_column("skip_one")].to_numpy()
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-6)
