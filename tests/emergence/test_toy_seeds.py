"""Toy seeds (emergence/toy/recipe.py): ``data_seed`` and ``init_seed`` default to ``seed``, set the
training data and the initial weights apart, and leave every existing recipe's hash (its cached
suite) as it was. No training here (tests/e2e/test_toy_seeds_slow.py trains)."""

from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from emergence.common import contract as C
from emergence.catalog import compose, model_source
from emergence.toy import as_recipe, recipe_hash
from emergence.toy.corpus import ToyCorpus
from emergence.toy.models import build_model
from emergence.toy.recipe import data_seed, init_seed

ROOT = Path(__file__).resolve().parents[2]


def recipe(name="fast_neox", **over):
    raw = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "recipe" / f"{name}.yaml"))
    raw.update(over)
    return as_recipe(raw)


def init_weights(rec):
    return {k: v.clone() for k, v in build_model(rec).state_dict().items()}


def batches(rec, steps=(0, 7)):
    corpus = ToyCorpus(rec.corpus, rec.seq_len, rec.batch_size, data_seed(rec))
    return [corpus.batch(s) for s in steps]


def test_default_recipes_keep_their_hash_so_cached_suites_stay_valid():
    # the folders of suites trained before data_seed / init_seed existed (toy_neox-4190916eb5, ...)
    # (the 4-head, 2000-step toy_neox of then; the default is 8 heads a layer and 3000 steps since issue 31)
    assert recipe_hash(compose(["model.recipe.n_heads=4", "model.recipe.steps=2000"]).model.recipe) == "4190916eb5"
    assert recipe_hash(compose(["model=toy_olmoe"]).model.recipe) == "845e6c27f1"
    assert recipe_hash(recipe()) == "4d23311faf"
    assert recipe_hash(recipe("neox", seed=1, n_heads=4, steps=2000)) == "b41248ba81"
    assert recipe_hash(recipe("neox", seed=1)) == recipe_hash(compose(["model.recipe.seed=1"]).model.recipe)
    assert recipe_hash(recipe(data_seed=0)) != recipe_hash(recipe()) != recipe_hash(recipe(init_seed=0))


def test_both_seeds_default_to_seed_and_each_sets_one_part_apart():
    base, other = recipe(seed=0), recipe(seed=1)
    assert (data_seed(base), init_seed(base), data_seed(other), init_seed(other)) == (0, 0, 1, 1)
    w0, b0 = init_weights(base), batches(base)
    explicit = recipe(seed=0, data_seed=0, init_seed=0)
    assert all(torch.equal(w0[k], v) for k, v in init_weights(explicit).items())
    assert all(np.array_equal(a, b) for a, b in zip(b0, batches(explicit)))
    data_only = recipe(seed=1, init_seed=0)  # the data of seed 1, the weights of seed 0
    assert all(torch.equal(w0[k], v) for k, v in init_weights(data_only).items())
    assert all(np.array_equal(a, b) for a, b in zip(batches(other), batches(data_only)))
    weight_only = recipe(seed=1, data_seed=0)  # the data of seed 0, the weights of seed 1
    assert not all(torch.equal(w0[k], v) for k, v in init_weights(weight_only).items())
    assert all(np.array_equal(a, b) for a, b in zip(b0, batches(weight_only)))


def test_each_toy_run_records_what_its_seed_varies():
    def seed_of(*overrides):
        cfg = compose(["model=toy_neox", *overrides]).model
        return model_source(cfg).run_seed(cfg)

    assert seed_of("model.recipe.seed=4") == C.RunSeed("4", "both", "toy_neox")
    assert seed_of("model.recipe.seed=4", "model.recipe.init_seed=0") == C.RunSeed("4", "data", "toy_neox")
    assert seed_of("model.recipe.seed=4", "model.recipe.data_seed=0") == C.RunSeed("4", "weight", "toy_neox")
    assert seed_of("model.recipe.data_seed=2", "model.recipe.init_seed=3") == C.RunSeed("d2-i3", "both", "toy_neox")
