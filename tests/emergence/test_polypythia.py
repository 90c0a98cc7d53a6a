"""The PolyPythias seed-suite registry (emergence/sources/polypythia.py), offline: its repos and
branches, one config for "this size, these seeds", the seed every run records, identities of
existing runs unchanged, bad input in one line, and the dry run of a seed sweep."""

from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from emergence import EmergenceError
from emergence.common import contract as C
from emergence.catalog import compose, model_source, selected_revisions
from emergence.revisions import Revision
from emergence.sources import polypythia as pp
from emergence.tracking import config_hash



def test_the_registry_lists_every_repo_and_pythias_154_branches():
    repos = pp.suite_repos()
    assert len(repos) == 5 * 10 + 6 and len({r[3] for r in repos}) == len(repos)
    names = {r[3] for r in repos}
    for size in ("14m", "31m", "70m", "160m", "410m"):
        assert {f"EleutherAI/pythia-{size}-seed{s}" for s in range(1, 10)} <= names
        assert f"EleutherAI/pythia-{size}" in names  # the original run, seed 1234
    assert {f"EleutherAI/pythia-160m-{k}-seed{s}" for k in ("data", "weight") for s in (1, 2, 3)} <= names
    assert not any("70m-data" in n or "410m-weight" in n for n in names)
    cfg = compose(["model=polypythia", "model.size=14m", "model.seed=9"]).model
    revisions = model_source(cfg).revisions(cfg)
    assert len(revisions) == 154 and "main" not in {r.name for r in revisions}
    steps = [r.step for r in revisions]
    assert steps[:12] == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000] and steps[-1] == 143000
    assert all(b - a == 1000 for a, b in zip(steps[11:], steps[12:]))
    assert all(r.tokens == r.step * 2_097_152 for r in revisions)


def test_the_sources_command_lists_the_suites_repos(capsys):
    from emergence.sources.__main__ import main

    assert main(["repos", "polypythia"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 56 and "160m\tweight\t3\tEleutherAI/pythia-160m-weight-seed3\t154 branches" in lines
    assert main(["repos", "pythia_1b"]) == 2
    assert "repos lists the runs of a seed suite" in capsys.readouterr().err


@pytest.mark.parametrize("overrides, repo, seed", [
    (["model.size=160m", "model.seed=3"], "EleutherAI/pythia-160m-seed3", C.RunSeed("3", "both", "polypythia_160m")),
    (["model.size=70m", "model.seed=1234"], "EleutherAI/pythia-70m", C.RunSeed("1234", "both", "polypythia_70m")),
    (["model.size=160m", "model.seed_kind=data", "model.seed=2"], "EleutherAI/pythia-160m-data-seed2",
     C.RunSeed("2", "data", "polypythia_160m")),
    (["model.size=160m", "model.seed_kind=weight", "model.seed=1"], "EleutherAI/pythia-160m-weight-seed1",
     C.RunSeed("1", "weight", "polypythia_160m")),
])
def test_one_config_picks_a_run_and_it_records_its_seed(overrides, repo, seed):
    from emergence.catalog import model_label
    from emergence.screening import run_params

    cfg = compose(["model=polypythia", *overrides])
    source = model_source(cfg.model)
    final = selected_revisions(cfg.model, OmegaConf.create({"select": "final", "k": 10, "name": None, "pin": None}))
    assert final == [Revision(143000 * 2_097_152, 143000, "step143000")]  # never main
    assert source.locate(cfg.model, final[0]).where == repo and source.locate(cfg.model, final[0]).revision == "step143000"
    assert cfg.model.name == seed.group and source.run_seed(cfg.model) == seed
    adapter = SimpleNamespace(n_layers=12, n_heads=12, head_dim=64)
    params = run_params(cfg, final[0], adapter, source.revisions(cfg.model), source.run_seed(cfg.model))
    assert {k: params[k] for k in (C.SEED_PARAM, C.SEED_KIND_PARAM, C.SEED_GROUP_PARAM)} == seed.params()
    assert C.run_seed(params) == seed
    assert model_label(cfg.model) == f"{seed.group} [{seed.label}]"
    assert source.download_sizes(cfg.model, final)["step143000"].startswith(f"{repo}: ")


@pytest.mark.parametrize("overrides, message", [
    (["model.size=1b"], "model.size='1b' is unknown; valid: 14m, 31m, 70m, 160m, 410m"),
    (["model.seed=10"], "model.seed=10 is not a both-seed run of pythia-160m; valid: 1, 2, 3, 4, 5, 6, 7, 8, 9, 1234"),
    (["model.size=70m", "model.seed_kind=data"], "model.seed_kind=data exists for size 160m only"),
    (["model.seed_kind=weight", "model.seed=4"], "model.seed=4 is not a weight-seed run of pythia-160m; valid: 1, 2, 3"),
    (["model.repo=EleutherAI/pythia-160m"], "computes the repo from model.size, model.seed and model.seed_kind"),
])
def test_a_run_the_suite_does_not_hold_is_refused_in_one_line(overrides, message):
    from emergence.config import check_config

    cfg = compose(["model=polypythia", *overrides])
    with pytest.raises(EmergenceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_config(cfg)
        model_source(cfg.model)


def test_models_without_a_seed_keep_their_run_identity():
    """The seed keys are null for every other model and then left out of the identity hash, so
    every run already in a store keeps its hash (and is not screened again)."""
    for overrides in (["model=pythia_160m"], ["model=toy_neox"], ["model=olmo_1b_0724"]):
        cfg = compose(overrides)
        revision = Revision(1000, 1, "step1")
        bare = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
        for key in ("size", "seed", "seed_kind"):
            assert bare.model.pop(key) is None
        assert config_hash(cfg, revision) == config_hash(bare, revision)
    seeded = compose(["model=polypythia", "model.seed=2"])
    assert config_hash(seeded, revision) != config_hash(compose(["model=polypythia", "model.seed=3"]), revision)


def test_toy_runs_record_their_recipe_seed():
    from emergence.catalog import model_label

    cfg = compose(["model=toy_neox", "model.recipe.seed=3"]).model
    assert model_source(cfg).run_seed(cfg) == C.RunSeed("3", "both", "toy_neox")
    assert model_label(cfg) == "toy_neox [seed 3]"
    assert model_label(compose(["model=toy_neox"]).model) == "toy_neox"  # the default seed, none swept: no suffix
    assert model_source(compose(["model=pythia_1b"]).model).run_seed(None) is None


@pytest.mark.cli
def test_dry_run_of_a_seed_sweep_lists_every_job_offline(monkeypatch, capsys, tmp_path):
    """``python -m emergence -m model=polypythia model.size=160m model.seed=1,2,3 revision=logspaced
    dry_run=true``, in this process: 30 jobs, each naming its seed and repo; nothing loaded,
    downloaded or logged."""
    import sys

    import huggingface_hub

    import emergence.refine_rounds
    import emergence.screening
    from emergence.__main__ import cli

    def work(*args, **kwargs):
        raise AssertionError("a dry run started work (a model load, a download or tracking)")

    for module, name in ((emergence.screening, "load"), (emergence.screening, "revision_pipeline"),
                         (emergence.screening, "Tracker"), (emergence.refine_rounds, "Tracker")):
        monkeypatch.setattr(module, name, work)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", work)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", ["emergence", "-m", "model=polypythia", "model.size=160m", "model.seed=1,2,3",
                                      "revision=logspaced", "dry_run=true", f"tracking.uri=sqlite:///{tmp_path}/db/m.db",
                                      f"hydra.sweep.dir={tmp_path}/sweep", f"cache.toy_dir={tmp_path}/toy"])
    capsys.readouterr()
    cli()
    out = capsys.readouterr().out
    assert "dry run: 30 job(s)" in out
    lines = [line for line in out.splitlines() if "polypythia_160m [seed" in line]
    assert len(lines) == 30
    for seed in (1, 2, 3):
        mine = [line for line in lines if f"[seed {seed}]" in line]
        assert len(mine) == 10 and all(f"EleutherAI/pythia-160m-seed{seed}: download; hub unreachable" in line for line in mine)
    assert "step143000" in lines[-1] and " main " not in out
    assert not (tmp_path / "db").exists() and not (tmp_path / "sweep").exists()
