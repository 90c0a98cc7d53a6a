"""The model catalog: the YAML files of ``conf/model/`` and the revisions each one has.

A model is one YAML file (repo or local folder, family, pretraining corpus, where the
revision list comes from); adding a model of a registered family (emergence/families/)
from a registered source (emergence/sources/, chosen by ``model.revisions``) needs no
code. ``pythia``, ``olmo`` and ``olmoe`` are short names for the study's three models
(their YAML files only point at the full entries).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra_plugins.emergence_searchpath import add_config_dir, user_config_dirs
from omegaconf import DictConfig

import emergence.config  # noqa: F401  (registers the schema ``emergence_schema`` that conf/config.yaml names)
from emergence import CONF_DIR, EmergenceError
from emergence import families
from emergence import revisions as rv
from emergence.sources import ModelSource, source_for

#: Config groups a user picks options of on the command line.
GROUPS = ("model", "corpus", "revision", "screen", "tracking", "recipe", "live")


def config_dirs() -> List[Path]:
    """Where config options are found: the package's ``conf/``, then the user's folders
    (``$EMERGENCE_HOME/conf``, ``--config-dir``, ``hydra.searchpath``: hydra_plugins/emergence_searchpath)."""
    return [CONF_DIR] + [Path(d) for d in user_config_dirs()]


def use_config_dirs(argv: Sequence[str]) -> List[str]:
    """Add the folders a command line gives with Hydra's ``--config-dir DIR`` (``-cd``) or
    ``hydra.searchpath=[file://DIR,...]`` to the search path of this process, so every check
    made before Hydra starts (known model names, ``--help``, dry runs) sees them; returns them.
    A folder that does not exist is refused in one line."""
    found = []
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in ("--config-dir", "-cd"):
            found.append(value if eq else (argv[i + 1] if i + 1 < len(argv) else ""))
        elif flag.lstrip("+") == "hydra.searchpath":
            found += [v.strip().strip("'\"") for v in value.strip("[]").split(",") if v.strip()]
    folders = []
    for entry in found:
        if entry.startswith("pkg://"):
            continue
        folder = entry[len("file://"):] if entry.startswith("file://") else entry
        if not Path(folder).is_dir():
            raise EmergenceError(f"config folder {folder!r} (--config-dir / hydra.searchpath) does not exist")
        add_config_dir(str(Path(folder).resolve()))
        folders.append(folder)
    return folders


def group_options(group: str) -> List[str]:
    """The options of a config group: the YAML files in ``<dir>/<group>/`` of every config folder."""
    return sorted({p.stem for d in config_dirs() for p in (d / group).glob("*.yaml") if not p.stem.startswith("_")})


def option_file(group: str, option: str) -> Path:
    """The YAML file of ``group=option``: the first config folder holding it."""
    for folder in config_dirs():
        if (folder / group / f"{option}.yaml").is_file():
            return folder / group / f"{option}.yaml"
    raise EmergenceError(f"unknown {group} {option!r}; valid: {', '.join(group_options(group))}")


def check_group_choice(group: str, value: str) -> None:
    options = group_options(group)
    if value not in options:
        raise EmergenceError(f"unknown {group} {value!r}; valid: {', '.join(options)}")


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose the primary config with Hydra (outside a Hydra app)."""
    if GlobalHydra.instance().is_initialized():
        return hydra_compose(config_name="config", overrides=list(overrides))
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def load_model_config(name: str) -> DictConfig:
    check_group_choice("model", name)
    return compose([f"model={name}"]).model


def model_source(model: DictConfig) -> ModelSource:
    """The source of ``model`` (``model.revisions``), after checking its family and the
    config against the source (emergence/sources/)."""
    if model.family not in families.family_choices():
        raise EmergenceError(f"unsupported family {model.family!r} for model {model.name!r}; "
                             f"supported: {', '.join(families.family_choices())}")
    source = source_for(model)
    source.check(model)
    return source


def model_revisions(model: DictConfig) -> List[rv.Revision]:
    """Every revision of ``model``, ordered by tokens."""
    return model_source(model).revisions(model)


def selected_revisions(model: DictConfig, revision: DictConfig,
                       known: Optional[List[rv.Revision]] = None) -> List[rv.Revision]:
    """The revisions a job screens: the selection, or the one pinned revision of it (for
    ``refine``, whose later rounds the sweeper pins, any of the model's known revisions).
    ``known``: the model's revisions where the caller has them (:func:`model_revisions`)."""
    known = model_revisions(model) if known is None else known
    selection = rv.select(known, revision.select, model.name, k=revision.k, name=revision.name)
    if revision.pin is None:
        return selection
    for r in (known if revision.select == "refine" else selection):
        if r.name == revision.pin:
            return [r]
    raise EmergenceError(f"revision.pin={revision.pin!r} is not in the {revision.select} selection of "
                         f"{model.name!r}; valid: {', '.join(r.name for r in selection)}")


#: The config keys that choose a run of a seed suite: named on the command line (``-m
#: model.recipe.seed=0,1,2``), they put the seed in every label (:func:`model_label`).
SEED_KEYS = ("model.seed", "model.seed_kind", "model.recipe.seed", "model.recipe.data_seed", "model.recipe.init_seed")


def seed_on_command_line() -> bool:
    """Whether the command line in effect (Hydra's overrides: a job's, or a sweep's while it plans)
    sets one of :data:`SEED_KEYS`."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return False
    overrides = HydraConfig.get().overrides
    return any(o.split("=", 1)[0].lstrip("+~") in SEED_KEYS for o in [*overrides.task, *(overrides.hydra or [])])


def model_label(model: DictConfig) -> str:
    """The model's name, with its seed where a seed tells its runs apart (``toy_neox [seed 3]``): a
    run of a seed suite named by its seed (PolyPythia), a toy trained with another seed than its
    recipe's default, or any model when the command line sets a seed (a seed sweep). The default
    job's toy is ``toy_neox``."""
    source = model_source(model)
    seed = source.run_seed(model)
    if seed is None or not (source.names_seed(model) or seed_on_command_line()):
        return str(model.name)
    return f"{model.name} [{seed.label}]"


#: How many revisions' ``config.json`` the family is read from, in order, until one can be read.
FAMILY_CONFIG_TRIES = 3


def resolve_family(model: DictConfig, revisions: Sequence[rv.Revision], network: bool = True) -> str:
    """The family that screens ``model`` (emergence.families.choose), from the ``config.json`` of
    its first revision, read before any weights are loaded (a local folder, the HF cache, or
    with ``network`` the hub's small config file); ``model`` is left as it is. Without a
    readable config (a toy suite before training; a dry run offline) an explicit family stands
    and ``auto`` stays ``auto``; a job then reads the config with the network, whose failure
    offline is one line."""
    if not revisions:
        return str(model.family)
    source = model_source(model)
    config, first = None, revisions[0]
    for first in revisions[:FAMILY_CONFIG_TRIES]:  # a damaged first config.json: the next revision's tells
        config = source.read_config(model, first, network=network)
        if config is not None:
            break
    if config is None:
        return str(model.family)
    where = f"{model.name}@{first.name}"
    model_type = str(config.get("model_type", ""))
    return families.choose(str(model.family), model_type, where, lambda: _config_problem(config)).name


def _config_problem(config: dict):
    from emergence.adapters import config_problem  # (torch and transformers only for a type no family covers)

    return config_problem(config)
