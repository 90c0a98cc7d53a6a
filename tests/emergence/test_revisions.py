"""The revisions: Pythia's computed schedule (emergence/sources/pythia.py), OLMo/OLMoE branch parsing and snapshots
(emergence/sources/snapshot.py), selection (emergence/revisions.py)."""

import math

import pytest

from emergence import EmergenceError
from emergence import revisions as rv
from emergence.sources import snapshot
from emergence.sources.pythia import pythia_revisions
from emergence.catalog import load_model_config, model_revisions

# Real branch names of allenai/OLMo-1B-0724-hf and allenai/OLMoE-1B-7B-0924.
REAL_BRANCHES = ["main", "step20000-tokens41B", "step1454000-tokens3048B", "step5000-tokens20B",
                 "step1220000-tokens5117B", "step1200000-tokens5033B"]


def test_pythia_has_154_revisions_with_tokens():
    revs = pythia_revisions()
    assert len(revs) == 154
    names = [r.name for r in revs]
    assert names[:12] == ["step0", "step1", "step2", "step4", "step8", "step16", "step32", "step64",
                          "step128", "step256", "step512", "step1000"]
    assert names[-1] == "step143000"
    assert all(r.tokens == r.step * 2_097_152 for r in revs)
    assert revs[-1].tokens == 299_892_736_000  # ~299.9B


def test_branch_names_parse_tokens_not_steps():
    revs = snapshot.revisions_from_branches(REAL_BRANCHES)
    assert [r.name for r in revs][0] == "step5000-tokens20B"
    by_name = {r.name: r for r in revs}
    assert "main" not in by_name
    assert by_name["step20000-tokens41B"].tokens == 41 * 10**9
    assert by_name["step20000-tokens41B"].step == 20000
    assert by_name["step1454000-tokens3048B"].tokens == 3048 * 10**9
    assert snapshot.parse_branch("step10-tokens5M").tokens == 5 * 10**6
    assert snapshot.parse_branch("step10") is None


def test_derived_snapshots_follow_the_documented_schedule():
    olmoe = snapshot.derived_revisions("olmoe_1b_7b_0924")
    assert olmoe[0].name == "step5000-tokens20B" and olmoe[-1].name == "step1220000-tokens5117B"
    assert {"step1200000-tokens5033B"} <= {r.name for r in olmoe}
    olmo = snapshot.derived_revisions("olmo_1b_0724")
    assert olmo[-1].name == "step1454000-tokens3048B"
    assert "step20000-tokens41B" in {r.name for r in olmo}


def test_committed_snapshots_load_offline_and_say_their_source():
    import json

    for name in ("olmo_1b_0724", "olmoe_1b_7b_0924"):
        data = json.loads(snapshot.snapshot_path(name).read_text())
        assert data["source"] in ("hub", "derived")
        assert model_revisions(load_model_config(name)) == rv.read_revision_file(snapshot.snapshot_path(name))


def test_snapshot_roundtrip(tmp_path):
    revs = snapshot.revisions_from_branches(REAL_BRANCHES)
    path = snapshot.write_snapshot("x", "org/x", revs, source="hub", path=tmp_path / "x.json")
    assert rv.read_revision_file(path) == revs


@pytest.mark.parametrize("k", [2, 5, 10])
def test_logspaced_has_k_revisions_ends_included_and_ordered(k):
    revs = pythia_revisions()
    chosen = rv.logspaced(revs, k)
    assert len(chosen) == k
    positive = [r for r in revs if r.tokens > 0]
    assert chosen[0] == positive[0] and chosen[-1] == positive[-1]
    assert chosen == sorted(chosen) and len(set(chosen)) == k
    logs = [math.log10(r.tokens) for r in chosen]
    gaps = [b - a for a, b in zip(logs, logs[1:])]
    ideal = (logs[-1] - logs[0]) / (k - 1)
    # Pythia's grid is coarse (powers of 2, then every 1000): each gap is within a factor of the ideal.
    assert all(0.2 * ideal < g < 2.5 * ideal for g in gaps)


def test_logspaced_on_a_dense_grid_is_close_to_geometric():
    revs = [rv.Revision(t, t, f"step{t}") for t in range(1, 100001)]
    chosen = rv.logspaced(revs, 6)
    assert [r.tokens for r in chosen] == [1, 10, 100, 1000, 10000, 100000]


def test_select_rules_and_errors():
    revs = pythia_revisions()
    assert rv.select(revs, "final", "p")[0].name == "step143000"
    assert len(rv.select(revs, "all", "p")) == 154
    assert rv.select(revs, "named", "p", name="step4")[0].tokens == 4 * 2_097_152
    with pytest.raises(EmergenceError, match=r"unknown revision 'step1001' for model 'p'; nearest valid: step1000, step2000"):
        rv.select(revs, "named", "p", name="step1001")
    with pytest.raises(EmergenceError, match="unknown revision selection 'some'; valid: logspaced"):
        rv.select(revs, "some", "p")


def test_refresh_offline_fails_clearly_and_keeps_the_snapshot(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EmergenceError, match="cannot list the branches of 'allenai/OLMoE-1B-7B-0924'"):
        snapshot.refresh("olmoe_1b_7b_0924", "allenai/OLMoE-1B-7B-0924", path=tmp_path / "s.json")
    assert not (tmp_path / "s.json").exists()
