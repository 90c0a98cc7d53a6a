"""Model registry: the YAML files of ``conf/model/`` and the revisions each one has.

A model is one YAML file (repo or local folder, family, pretraining corpus, how
tokens are counted, where the revision list comes from); adding a model of a
supported family needs no code. ``pythia``, ``olmo`` and ``olmoe`` are short names
for the study's three models (their YAML files only point at the full entries).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence

from omegaconf import DictConfig, OmegaConf

from emergence import PROJECT_ROOT, EmergenceError
from emergence import revisions as rv
from emergence.config import FAMILIES

CONF_DIR = PROJECT_ROOT / "conf"
#: Config groups a user picks options of on the command line.
GROUPS = ("model", "corpus", "revision", "screen", "tracking", "recipe")


def group_options(group: str) -> List[str]:
    """The options of a config group: the YAML files in ``conf/<group>/``."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml") if not p.stem.startswith("_"))


def check_group_choice(group: str, value: str) -> None:
    options = group_options(group)
    if value not in options:
        raise EmergenceError(f"unknown {group} {value!r}; valid: {', '.join(options)}")


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose the primary config with Hydra (outside a Hydra app)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return hydra_compose(config_name="config", overrides=list(overrides))
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def load_model_config(name: str) -> DictConfig:
    check_group_choice("model", name)
    return compose([f"model={name}"]).model


def model_revisions(model: DictConfig) -> List[rv.Revision]:
    """Every revision of ``model``, ordered by tokens."""
    source = model.revisions
    if model.family not in FAMILIES:
        raise EmergenceError(f"unsupported family {model.family!r} for model {model.name!r}; "
                             f"supported: {', '.join(FAMILIES)}")
    if source == "pythia":
        return rv.pythia_revisions()
    if source == "snapshot":
        path = rv.snapshot_path(model.name)
        if not path.exists():
            raise EmergenceError(
                f"no revision snapshot for model {model.name!r} at {path}; make one with "
                f"`python -m emergence.revisions refresh {model.name}` (needs the hub) or "
                f"`python -m emergence.revisions derive {model.name}`")
        return rv.read_revision_file(path)
    if source == "folder":
        if not model.path:
            raise EmergenceError(f"model {model.name!r} has revisions: folder but no model.path")
        return rv.folder_revisions(Path(model.path), model.tokens.tokens_per_step)
    if source == "toy":
        from emergence.toy import checkpoint_schedule

        return sorted(rv.Revision(int(r["tokens"]), int(r["step"]), r["name"])
                      for r in checkpoint_schedule(model.recipe))
    raise EmergenceError(f"unknown revision source {source!r} for model {model.name!r}; "
                         "valid: pythia, snapshot, folder, toy")


def selected_revisions(model: DictConfig, revision: DictConfig) -> List[rv.Revision]:
    """The revisions a job screens: the selection, or the one pinned revision of it."""
    selection = rv.select(model_revisions(model), revision.select, model.name,
                          k=revision.k, name=revision.name)
    if revision.pin is None:
        return selection
    for r in selection:
        if r.name == revision.pin:
            return [r]
    raise EmergenceError(f"revision.pin={revision.pin!r} is not in the {revision.select} selection of "
                         f"{model.name!r}; valid: {', '.join(r.name for r in selection)}")


def model_metadata(model: DictConfig) -> Dict[str, str]:
    return {"model": model.name, "family": model.family,
            "pretraining_corpus": model.pretraining_corpus,
            "source": model.repo or str(model.path)}


def resolve_container(cfg: DictConfig) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
