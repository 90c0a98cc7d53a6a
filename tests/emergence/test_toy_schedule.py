"""The toy suite's checkpoint schedule and recipe handling (no training)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from emergence import EmergenceError
from emergence.toy import ToyRecipeConfig, as_recipe, checkpoint_schedule, recipe_hash, suite_folder

RECIPE_DIR = Path(__file__).resolve().parents[2] / "conf" / "recipe"
SHIPPED = ("neox", "olmo", "olmoe")


def test_schedule_has_step0_logspaced_steps_and_token_counts():
    rec = ToyRecipeConfig(steps=4000, first_checkpoint=25, n_checkpoints=16, batch_size=32, seq_len=64)
    sched = checkpoint_schedule(rec)
    steps = [r["step"] for r in sched]
    assert steps[0] == 0 and steps[1] == 25 and steps[-1] == 4000
    assert steps == sorted(set(steps))
    assert len(steps) == 17
    ratios = np.diff(np.log(steps[1:]))
    assert np.allclose(ratios, ratios.mean(), atol=0.02)  # log-spaced up to rounding
    for r in sched:
        assert r["name"] == f"step{r['step']}"
        assert r["tokens"] == r["step"] * 32 * 64
        assert set(r) == {"name", "step", "tokens"}


def test_schedule_deduplicates_when_steps_are_few():
    sched = checkpoint_schedule(ToyRecipeConfig(steps=10, first_checkpoint=1, n_checkpoints=16))
    steps = [r["step"] for r in sched]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == 10
    assert len(steps) <= 11


def test_schedule_single_checkpoint():
    sched = checkpoint_schedule(ToyRecipeConfig(steps=50, first_checkpoint=50, n_checkpoints=1))
    assert [r["step"] for r in sched] == [0, 50]


def test_schedule_needs_no_training(tmp_path):
    rec = ToyRecipeConfig(steps=100, first_checkpoint=10)
    checkpoint_schedule(rec)
    assert not suite_folder(rec, tmp_path, "toy").exists()


def test_recipe_forms_agree_dict_dictconfig_dataclass():
    partial = {"family": "olmo", "steps": 300, "corpus": {"vocab_size": 96}}
    as_dc = as_recipe(partial)
    assert isinstance(as_dc, ToyRecipeConfig) and as_dc.corpus.vocab_size == 96 and as_dc.d_model == 64
    node = OmegaConf.merge(OmegaConf.structured(ToyRecipeConfig), partial)
    assert recipe_hash(partial) == recipe_hash(node) == recipe_hash(as_dc)
    assert checkpoint_schedule(partial) == checkpoint_schedule(node) == checkpoint_schedule(as_dc)


def test_hash_changes_with_any_recipe_value():
    base = recipe_hash(ToyRecipeConfig())
    assert recipe_hash({"seed": 1}) != base
    assert recipe_hash({"corpus": {"repeat_fraction": 0.25}}) != base
    assert recipe_hash({}) == base
    assert len(base) == 10


@pytest.mark.parametrize("bad, key", [
    ({"family": "llama"}, "recipe.family"),
    ({"d_model": 60, "n_heads": 8}, "recipe.d_model"),
    ({"first_checkpoint": 0}, "recipe.first_checkpoint"),
    ({"first_checkpoint": 5000}, "recipe.first_checkpoint"),
    ({"family": "olmoe", "top_k": 9}, "recipe.top_k"),
    ({"lr_schedule": "linear"}, "recipe.lr_schedule"),
    ({"corpus": {"first_token": 500}}, "recipe.corpus.first_token"),
    ({"seq_len": 32}, "recipe.seq_len"),
    ({"corpus": {"segment_min": 10, "segment_max": 5}}, "recipe.corpus.segment_min"),
])
def test_bad_recipe_names_the_key(bad, key):
    with pytest.raises(EmergenceError, match=key.replace(".", r"\.")):
        checkpoint_schedule(bad)


def test_unknown_recipe_key_is_refused():
    with pytest.raises(EmergenceError, match="n_layer"):
        as_recipe({"n_layer": 4})


@pytest.mark.parametrize("name", SHIPPED + ("fast_neox",))
def test_shipped_recipes_are_valid(name):
    raw = OmegaConf.load(RECIPE_DIR / f"{name}.yaml")
    rec = as_recipe(raw)  # unknown keys would raise
    assert rec.n_layers >= 4
    sched = checkpoint_schedule(rec)
    assert sched[0]["step"] == 0
    if name in SHIPPED:
        assert len(sched) >= 11  # a sweep of 10 log-spaced revisions has them to choose from
        assert rec.corpus.first_token == 0


def test_shipped_recipes_cover_the_three_families():
    families = {as_recipe(OmegaConf.load(RECIPE_DIR / f"{n}.yaml")).family for n in SHIPPED}
    assert families == {"gpt_neox", "olmo", "olmoe"}
