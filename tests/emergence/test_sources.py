"""The model-source registry (emergence/sources/): one file per source, chosen by
``model.revisions``; each source's revisions, checks, location, limits, dry-run sizes and
eviction; a new source is added through the registry alone."""

import json
from pathlib import Path
from typing import List

import pytest
from omegaconf import OmegaConf

from tiny_models import save_revisions, tiny_model
from emergence import EmergenceError
from emergence import sources
from emergence.revisions import Revision


def model(**kw):
    base = {"name": "m", "family": "gpt_neox", "repo": None, "path": None, "revisions": "folder", "dtype": "auto",
            "tokens": {"tokens_per_step": None}, "recipe": None}
    base.update(kw)
    return OmegaConf.create(base)


def test_registry_finds_one_file_per_source_and_the_config_uses_it():
    from emergence.config import MODEL_SOURCES, model_sources

    assert sources.source_names() == ("crfm_gpt2", "folder", "polypythia", "pythia", "snapshot", "toy")
    assert MODEL_SOURCES == model_sources() == sources.source_names()
    assert sources.source_for(model(revisions="pythia")).name == "pythia"
    with pytest.raises(EmergenceError, match="unknown revision source 'ftp' for model 'm'; valid: crfm_gpt2, folder, polypythia, pythia"):
        sources.source_for(model(revisions="ftp"))


@pytest.mark.parametrize("spec, message", [
    (dict(revisions="pythia"), "model 'm' has revisions: pythia but no model.repo"),
    (dict(revisions="pythia", repo="EleutherAI/pythia-70m", path="/x"),
     "has revisions: pythia, which reads the hub, and model.path='/x'; for local checkpoint folders set "
     "model.revisions=folder"),
    (dict(revisions="snapshot", repo="org/nosnap", name="nosnap"),
     "no revision snapshot for model 'nosnap' at .*; make one with `python -m emergence.sources refresh nosnap`"),
    (dict(revisions="folder"), "model 'm' has revisions: folder but no model.path"),
    (dict(revisions="folder", path="/no/such/folder"), "model.path='/no/such/folder' does not exist"),
    (dict(revisions="toy"), "model 'm' has revisions: toy but no model.recipe"),
])
def test_each_source_checks_the_config_before_any_work(spec, message):
    cfg = model(**spec)
    with pytest.raises(EmergenceError, match=message):
        sources.source_for(cfg).check(cfg)


def test_pythia_revisions_are_computed_with_the_configured_tokens_per_step():
    cfg = model(revisions="pythia", repo="EleutherAI/pythia-70m", tokens={"tokens_per_step": 2097152})
    source = sources.source_for(cfg)
    revisions = source.revisions(cfg)
    assert len(revisions) == 154 and revisions[-1].tokens == 143000 * 2097152
    assert source.evictable
    assert source.locate(cfg, revisions[-1]) == sources.Location("EleutherAI/pythia-70m", "step143000")
    assert source.label(cfg, revisions[-1], "/cache/x") == "EleutherAI/pythia-70m@step143000"


def test_folder_source_lists_locates_sizes_and_declares_limits(tmp_path):
    folder = tmp_path / "ckpt"
    for step in (10, 100):
        tiny_model("olmo", max_positions=64).save_pretrained(folder / f"step{step}")
    cfg = model(family="olmo", path=str(folder), tokens={"tokens_per_step": 7})
    source = sources.source_for(cfg)
    revisions = source.revisions(cfg)
    assert [(r.name, r.tokens) for r in revisions] == [("step10", 70), ("step100", 700)]
    assert source.fetch(cfg, revisions[0]) == str(folder / "step10")
    assert source.label(cfg, revisions[0], str(folder / "step10")) == str(folder / "step10")
    limits = source.declared_limits(cfg, revisions)
    assert (limits.vocab, limits.context, limits.layers, limits.heads) == (96, 64, 4, 4)
    sizes = source.download_sizes(cfg, revisions + [Revision(0, 0, "step0")])
    assert sizes["step10"].startswith("local, ") and sizes["step0"] == "unknown"
    assert not source.evictable and source.evict(cfg, revisions[0]) == 0
    with pytest.raises(EmergenceError, match="local checkpoint folder .*step5.* is missing"):
        source.locate(cfg, Revision(5, 5, "step5"))


def test_toy_source_takes_limits_and_schedule_from_the_recipe(tmp_path):
    from emergence.catalog import compose

    cfg = compose(["model=toy_olmoe"]).model
    source = sources.source_for(cfg)
    limits = source.declared_limits(cfg, [])
    assert (limits.vocab, limits.context) == (int(cfg.recipe.corpus.vocab_size), int(cfg.recipe.seq_len))
    assert set(source.download_sizes(cfg, source.revisions(cfg)[:2]).values()) == {"toy (trained here)"}
    with pytest.raises(EmergenceError, match="toy checkpoint .* is missing"):  # fetch never trains
        source.fetch(cfg, source.revisions(cfg)[0], toy_dir=str(tmp_path))


# --- a new source through the registry alone ----------------------------------------------------

class TokensFolderSource(sources.ModelSource):
    """Test source: ``<model.path>/tokens<N>/`` folders, N the training tokens, step = rank."""

    name = "tokens_folder"
    description = "local folders named tokens<N>"

    def check(self, model) -> None:
        if not model.path or not Path(model.path).is_dir():
            raise EmergenceError(f"model.path={model.path!r} does not exist")

    def revisions(self, model) -> List[Revision]:
        tokens = sorted(int(p.name[len("tokens"):]) for p in Path(model.path).glob("tokens*"))
        return [Revision(t, i, f"tokens{t}") for i, t in enumerate(tokens)]

    def locate(self, model, revision, toy_dir=None, progress=True) -> sources.Location:
        return sources.Location(str(Path(model.path) / revision.name))

    def config_location(self, model, revision):
        return str(Path(model.path) / revision.name), {}


@pytest.fixture
def tokens_folder_source():
    source = sources.register(TokensFolderSource())
    yield source
    sources.unregister(source.name)


@pytest.mark.store
def test_a_source_added_through_the_registry_alone_plans_and_screens(tokens_folder_source, tmp_path):
    from emergence.job import plan_jobs, run_job
    from emergence.catalog import compose

    folder = tmp_path / "ckpt"
    for tokens in (500, 5000, 50000):
        tiny_model("gpt_neox", seed=tokens).save_pretrained(folder / f"tokens{tokens}")
    cfg = compose(["model=pythia_70m", "model.name=tok", "model.repo=null", f"model.path={folder}",
                   "model.revisions=tokens_folder", "revision=final", "corpus.n_sequences=16",
                   "corpus.batch_size=8", "corpus.segment_length=12", "stats=false",
                   f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"tracking.artifacts={tmp_path}/art"])
    (job,) = plan_jobs(cfg)
    assert (job.revision.name, job.revision.tokens, job.download) == ("tokens50000", 50000, "unknown")
    (result,) = run_job(cfg, progress=False)
    assert result.revision.name == "tokens50000" and result.metrics["tokens"] == 50000


def test_dry_run_sizes_come_from_the_source(tmp_path):
    folder = save_revisions(tmp_path / "ckpt", "gpt_neox", steps=(1, 2))
    cfg = model(path=str(folder))
    revisions = sources.source_for(cfg).revisions(cfg)
    assert all(v.startswith("local, ") for v in sources.source_for(cfg).download_sizes(cfg, revisions).values())
    assert json.loads((folder / "revisions.json").read_text())["revisions"][0]["tokens"] == 1000
    assert [r.tokens for r in revisions] == [1000, 2000]  # revisions.json wins over tokens_per_step
