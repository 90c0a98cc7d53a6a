"""Model sources: where a model's revisions come from and where each one lies on disk.

A model config picks its source with ``model.revisions``. Each source is a :class:`ModelSource`
in its own file of this package, named ``SOURCE`` (``pythia``, ``snapshot``, ``folder``, ``toy``,
``polypythia``, ``crfm_gpt2``); the registry finds those files itself, so adding a source is one
file plus its test (docs/families_and_sources.md). :func:`register` adds one at run time.

Importing this package does not import torch or transformers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from emergence import EmergenceError
from emergence.common.plugins import Registry, external_entries, package_entries
from emergence.revisions import Revision


@dataclass(frozen=True)
class ModelLimits:
    """What a probe must fit in, as a model declares it: the usable vocabulary and the context
    (None: unknown); layers and heads per layer (None: unknown), for the ablation's named heads."""

    vocab: int
    context: Optional[int]
    model: str = "the model"
    layers: Optional[int] = None
    heads: Optional[int] = None

    @classmethod
    def of(cls, config, vocab: int, model: str) -> "ModelLimits":
        """The limits an HF ``config`` declares, with ``vocab`` its usable vocabulary."""
        context = getattr(config, "max_position_embeddings", None)
        return cls(vocab, int(context) if context else None, model, getattr(config, "num_hidden_layers", None),
                   getattr(config, "num_attention_heads", None))


@dataclass(frozen=True)
class Location:
    """Where ``from_pretrained`` finds one revision."""

    #: A hub repo id or a local folder.
    where: str
    #: The hub revision (branch) to pass as ``revision=``; None for a local folder.
    revision: Optional[str] = None


def size_text(n: float) -> str:
    """Bytes as ``1.23 GB`` (decimal units)."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def folder_bytes(folder) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


class ModelSource:
    """One way of getting a model's revisions. Subclasses set :attr:`name` and override
    what differs; the defaults here suit sources whose revisions are local folders."""

    #: The ``model.revisions`` value that picks this source.
    name: str = ""
    #: One line for help texts.
    description: str = ""
    #: True when ``cache.evict=true`` deletes a screened revision (a hub download).
    evictable: bool = False

    def check(self, model) -> None:
        """Raise :class:`EmergenceError` (one line naming the key) when ``model`` cannot be
        used with this source; runs before any revision is listed or loaded."""

    def revisions(self, model) -> List[Revision]:
        """Every revision of ``model``, ordered by tokens."""
        raise NotImplementedError

    def write_problem(self, model, toy_dir: Optional[str] = None) -> Optional[str]:
        """Why this source could not write what it will write before screening (one line naming the
        folder and the setting that chose it), or None; checked before any work. Nothing by default."""
        return None

    def selection_problem(self, model, revisions: Sequence[Revision]) -> Optional[str]:
        """Why the selected ``revisions`` cannot be screened as listed (e.g. a local folder that is
        missing), as one line, or None; checked before any work. Nothing by default."""
        return None

    def prepare(self, model, revisions: Sequence[Revision], toy_dir: Optional[str] = None,
                progress: bool = True) -> None:
        """Work done once in the main thread before ``revisions`` are fetched (the toy
        suite trains here); nothing by default."""

    def locate(self, model, revision: Revision, toy_dir: Optional[str] = None,
               progress: bool = True) -> Location:
        """What ``from_pretrained`` is given for ``revision``."""
        raise NotImplementedError

    def fetch(self, model, revision: Revision, known: Sequence[Revision] = (), toy_dir: Optional[str] = None,
              progress: bool = True) -> str:
        """Put ``revision`` on local disk and return its folder (run in the download thread).
        Default: the located folder, which must hold a ``config.json``."""
        where = self.locate(model, revision, toy_dir, progress).where
        if not (Path(where) / "config.json").exists():
            raise EmergenceError(f"checkpoint folder {where!r} of model {model.name!r} is missing (no config.json)")
        return where

    def label(self, model, revision: Revision, folder: str) -> str:
        """The run's ``source`` param for ``revision`` read from ``folder``."""
        return folder

    def config_location(self, model, revision: Revision) -> Optional[Tuple[str, dict]]:
        """(path, ``AutoConfig.from_pretrained`` keywords) of the revision's ``config.json``
        without the network, or None when it cannot be known before loading."""
        return None

    def read_config(self, model, revision: Revision, network: bool = False) -> Optional[dict]:
        """The revision's ``config.json`` as a dict, read before any weights (a local folder or
        the HF cache; ``network``: a hub source may fetch that one small file); None when it
        cannot be read (a toy suite not trained yet, a hub revision offline and not cached, a
        damaged file: that revision's run then fails with the cause, the others go on)."""
        found = self.config_location(model, revision)
        if found is None or not Path(str(found[0]), "config.json").is_file():
            return None
        try:
            config = json.loads(Path(str(found[0]), "config.json").read_text())
        except (OSError, ValueError):  # a truncated or damaged config: that revision's run fails with the cause
            return None
        return config if isinstance(config, dict) else None

    def declared_limits(self, model, revisions: Sequence[Revision]):
        """The model's vocabulary, context, layers and heads as declared before any weights
        are loaded (a :class:`ModelLimits`), from the first revision's ``config.json``; None
        when unknown (the probe is then checked after loading)."""
        if not revisions:
            return None
        found = self.config_location(model, revisions[0])
        if found is None:
            return None
        from transformers import AutoConfig  # (transformers, which imports torch, only when asked: importing a source does not)

        try:
            config = AutoConfig.from_pretrained(found[0], **found[1])
        except Exception:  # noqa: BLE001  (not cached, or no config yet: checked after loading instead)
            return None
        return ModelLimits.of(config, int(config.vocab_size), model.name)

    def download_sizes(self, model, revisions: Sequence[Revision]) -> Dict[str, str]:
        """Per revision name, for a dry run: what a screen of it would download, as far as
        the disk knows (never the network); ``unknown`` by default."""
        return {r.name: "unknown" for r in revisions}

    def evict(self, model, revision: Revision) -> int:
        """Delete a screened revision's download; returns the bytes freed (0: nothing to do)."""
        return 0

    def run_seed(self, model):
        """Which training run of a seed suite ``model`` is (an :class:`emergence.common.contract.RunSeed`,
        logged with every run and pooled by ``stats``); None for a model of one run (default)."""
        return None

    def preparation(self, model, toy_dir: Optional[str] = None) -> str:
        """What a job must do before its first screen, for a dry run to say (a toy to train, with
        a time estimate); '' for nothing (default)."""
        return ""

    def names_seed(self, model) -> bool:
        """Whether the run's seed belongs in its label without a seed on the command line
        (:func:`emergence.catalog.model_label`): yes for a seed suite whose runs are named by
        their seed (default); a toy says no for its recipe's default seed."""
        return True


def model_get(model, key: str, default=None):
    """``model.<key>``, or ``default`` when the config has no such key (hand-made configs)."""
    value = model.get(key, default) if hasattr(model, "get") else getattr(model, key, default)
    return default if value is None else value


def tokens_per_step(model, default=None):
    """``model.tokens.tokens_per_step``, or ``default`` when unset."""
    return model_get(model_get(model, "tokens", {}), "tokens_per_step", default)


def _discover(table: Registry) -> None:
    """Import every module of this package and register its ``SOURCE``, then user code's."""
    for source in package_entries(__name__, __path__, "SOURCE", ModelSource):
        if source.name not in table:
            table.register(source)
    for source in external_entries("emergence.sources", "SOURCE", ModelSource):  # user code (entry points, $EMERGENCE_PLUGINS)
        table.register(source, replace=True)


def _check(source: ModelSource, table: Registry) -> None:
    if not source.name:
        raise EmergenceError(f"model source {type(source).__name__} has no name")


#: The model sources (``model.revisions``), by name.
SOURCES = Registry("revision source", discover=_discover, check=_check, order=lambda s: s.name, error=EmergenceError)
#: Add a source under its name (``replace``: over one of the same name).
register = SOURCES.register
#: Remove a source added with :func:`register` (tests clean up with it).
unregister = SOURCES.unregister
#: Every registered source, by name (sorted).
sources = SOURCES.entries
source_names = SOURCES.names


def source_for(model) -> ModelSource:
    """The source ``model.revisions`` names."""
    name = model_get(model, "revisions")
    if name not in SOURCES:
        raise EmergenceError(f"unknown revision source {name!r} for model {model_get(model, 'name')!r}; "
                             f"valid: {', '.join(SOURCES.names())}")
    return SOURCES.get(name)
