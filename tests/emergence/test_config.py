"""Every config group composes; the structured schema rejects misspelt keys and wrong types."""

import shutil

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError, ValidationError

from emergence.catalog import CONF_DIR, group_options, model_revisions

STUDY_ALIASES = {"pythia": "pythia_1b", "olmo": "olmo_1b_0724", "olmoe": "olmoe_1b_7b_0924"}


def compose_with(overrides, conf_dir=CONF_DIR):
    import emergence.config  # noqa: F401

    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_registry_lists_the_required_models():
    models = set(group_options("model"))
    for size in ("70m", "160m", "410m", "1b"):
        assert {f"pythia_{size}", f"pythia_{size}_deduped"} <= models
    assert {"olmo_1b_0724", "olmoe_1b_7b_0924", "toy_neox", "toy_olmo", "toy_olmoe"} <= models
    assert set(STUDY_ALIASES) <= models


@pytest.mark.parametrize("name", [n for n in group_options("model") if n != "folder"])  # (folder: model.path=DIR alone)
def test_every_registered_model_composes_and_lists_revisions(name):
    cfg = compose_with([f"model={name}"])
    assert cfg.model.family in ("gpt_neox", "olmo", "olmoe", "gpt2")
    assert cfg.model.repo or cfg.model.path or cfg.model.revisions in ("toy", "polypythia", "crfm_gpt2")  # repo from size + seed
    revisions = model_revisions(cfg.model)
    assert len(revisions) >= 10
    assert revisions == sorted(revisions)
    if name in STUDY_ALIASES:
        assert cfg.model.name == STUDY_ALIASES[name]


@pytest.mark.parametrize("group", ["corpus", "revision", "screen", "tracking"])
def test_every_group_option_composes(group):
    options = group_options(group)
    assert options
    for option in options:
        overrides = [f"{group}={option}"]
        if (group, option) == ("corpus", "text_file"):
            overrides.append("corpus.path=/tmp/x.txt")
        if (group, option) == ("revision", "named"):
            overrides.append("revision.name=step1000")
        cfg = compose_with(overrides + ["model=pythia_70m"])
        assert cfg[group] is not None


def test_tracking_uri_is_absolute_and_under_outputs():
    cfg = compose_with(["model=pythia_70m"])
    assert cfg.tracking.uri.startswith("sqlite:////")
    assert cfg.tracking.uri.endswith("/outputs/mlflow.db")


def test_wrong_type_fails_at_composition_naming_the_key():
    with pytest.raises(ConfigCompositionException) as info:
        compose_with(["model=pythia_70m", "corpus.n_sequences=many"])
    assert "n_sequences" in str(info.value) + str(info.value.__cause__)


def test_misspelt_key_in_a_yaml_file_fails_naming_the_key(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "model" / "broken.yaml").write_text(
        "name: broken\nrepo: org/broken\nfamily: gpt_neox\nrevisons: pythia\n")
    with pytest.raises((ConfigCompositionException, ConfigKeyError, ValidationError)) as info:
        compose_with(["model=broken"], conf_dir=conf)
    assert "revisons" in str(info.value) + str(info.value.__cause__)
    (conf / "screen" / "typed.yaml").write_text("name: typed\nlocal_window: wide\n")
    with pytest.raises((ConfigCompositionException, ValidationError)) as info:
        compose_with(["model=pythia_70m", "screen=typed"], conf_dir=conf)
    assert "local_window" in str(info.value) + str(info.value.__cause__)


def test_a_new_model_is_one_yaml_file(tmp_path):
    """A local checkpoint folder registered by a YAML file alone, no code."""
    from tiny_models import save_revisions

    folder = save_revisions(tmp_path / "ckpts", "olmo", steps=(10, 20, 40))
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "model" / "mine.yaml").write_text(
        f"name: mine\npath: {folder}\nfamily: olmo\npretraining_corpus: my_corpus\nrevisions: folder\n")
    cfg = compose_with(["model=mine"], conf_dir=conf)
    assert [r.name for r in model_revisions(cfg.model)] == ["step10", "step20", "step40"]


#: Identity hashes (emergence.tracking.config_hash) of stores made before issue 20: a store made
#: then must still be recognised, so a refactoring that renames or moves a config key keeps these.
#: The default toy's recipe became 8 heads a layer and 3000 steps (issue 31): a new model, so new
#: identities; its stores from before are those of the old recipe, given here by its two values.
OLD_TOY = ["model.recipe.n_heads=4", "model.recipe.steps=2000"]
KNOWN_HASHES = [
    (OLD_TOY, "33ac7d4413eb9365"),
    (["model=pythia_70m"], "fe36eccedc67049d"),
    (["model=pythia_70m", "corpus=xu2026", "screen=xu2026"], "003810a1aeb4c905"),
    (["screen=ablation", *OLD_TOY], "f80a320b1bc764ea"),
    (["model=polypythia", "model.size=160m", "model.seed=1"], "bd11f727da7304b5"),
    (["live=adaptive", *OLD_TOY], "33ac7d4413eb9365"),
    (["corpus=text_file", "corpus.path=/x.txt", *OLD_TOY], "9d0fb085a8879b11"),
]


@pytest.mark.parametrize("overrides, digest", KNOWN_HASHES, ids=[" ".join(o) or "default" for o, _ in KNOWN_HASHES])
def test_run_identity_hashes_are_those_of_earlier_stores(overrides, digest):
    from emergence.catalog import compose
    from emergence.revisions import Revision
    from emergence.tracking import config_hash

    assert config_hash(compose(overrides), Revision(1000, 1, "step1")) == digest


def test_each_corpus_kind_and_screen_recipe_has_its_implementation():
    """The schema's choices are the names of the corpus kinds' and screen recipes' tables (emergence/config.py,
    imported without torch), and each name imports the entry of that name; an unknown one is one line."""
    from emergence import EmergenceError
    from emergence.config import CORPUS_KINDS, SCREEN_RECIPES, CorpusConfig, ScreenConfig

    assert CORPUS_KINDS.names() == ("synthetic_induction", "text_file", "xu2026")
    assert SCREEN_RECIPES.names() == ("project", "xu2026")
    for table, schema_field in ((CORPUS_KINDS, CorpusConfig.__dataclass_fields__["kind"]),
                                (SCREEN_RECIPES, ScreenConfig.__dataclass_fields__["recipe"])):
        assert schema_field.metadata["choices"] == table.names()
        assert all(entry.name == name for name, entry in table.entries().items())
    with pytest.raises(EmergenceError, match="unknown corpus kind 'books'; valid: synthetic_induction, text_file, xu2026"):
        CORPUS_KINDS.get("books")
