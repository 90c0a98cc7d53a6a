"""The toy suite through the project's registry and standard loader (fast recipe)."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from emergence.catalog import CONF_DIR, model_revisions
from emergence.toy import as_recipe, checkpoint_schedule, suite_folder

TOY_MODELS = {"toy_neox": ("neox", "gpt_neox"), "toy_olmo": ("olmo", "olmo"), "toy_olmoe": ("olmoe", "olmoe")}


def compose_with(overrides):
    import emergence.config  # noqa: F401  (registers the schema)

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("model", sorted(TOY_MODELS))
def test_registered_toy_model_carries_its_recipe(model):
    recipe_name, family = TOY_MODELS[model]
    cfg = compose_with([f"model={model}"])
    assert cfg.model.revisions == "toy" and cfg.model.family == family
    shipped = as_recipe(OmegaConf.load(CONF_DIR / "recipe" / f"{recipe_name}.yaml"))
    assert as_recipe(cfg.model.recipe) == shipped
    assert shipped.family == family
    revisions = model_revisions(cfg.model)
    assert [(r.name, r.step, r.tokens) for r in revisions] == \
        [(r["name"], r["step"], r["tokens"]) for r in checkpoint_schedule(shipped)]


def test_standard_loader_trains_on_first_use_and_loads_sdpa(tmp_path):
    from emergence.loading import load

    cfg = compose_with(["model=toy_neox", "recipe@model.recipe=fast_neox", f"cache.toy_dir={tmp_path}"])
    revisions = model_revisions(cfg.model)
    folder = suite_folder(cfg.model.recipe, tmp_path, cfg.model.name)
    assert not folder.exists()
    loaded = load(cfg.model, revisions[-1], known=revisions, device="cpu", toy_dir=cfg.cache.toy_dir,
                  progress=False)
    assert folder.is_dir() and (folder / "revisions.json").exists()
    assert loaded.model.config._attn_implementation == "sdpa"  # the screen switches it per pass
    assert loaded.adapter.family == "gpt_neox" and loaded.adapter.n_layers == 4
    listed = json.loads((folder / "revisions.json").read_text())["revisions"]
    assert [(r.name, r.step, r.tokens) for r in revisions] == [(r["name"], r["step"], r["tokens"]) for r in listed]
    # Every revision loads through the same loader without retraining.
    stamp = (folder / "revisions.json").stat().st_mtime_ns
    first = load(cfg.model, revisions[0], known=revisions, device="cpu", toy_dir=cfg.cache.toy_dir, progress=False)
    assert first.source.endswith("step0")
    assert (folder / "revisions.json").stat().st_mtime_ns == stamp
