"""The text of ``python -m emergence --help``: config groups and the registries.

Hydra prints it: ``conf/config.yaml`` sets ``hydra.help.template`` to the ``${emergence_help:}``
resolver (:func:`register_resolver`), which calls :func:`registries_text`. Everything listed is
read from where it is defined (the YAML files under ``CONF_DIR``, the registries).
``python -m emergence.help`` prints the same text without composing a config.
"""

from __future__ import annotations

import textwrap
from typing import Dict, Iterable, List

from omegaconf import OmegaConf

import emergence.config as config
from emergence import CONF_DIR, emergence_home
from emergence.catalog import GROUPS, config_dirs, group_options, option_file

#: What each group sets, for the listing.
GROUP_DOC = {
    "model": "which model (hub repo or local folder, family, token counting, revision source)",
    "corpus": "the probe batch",
    "revision": "which checkpoints",
    "screen": "which head classes, thresholds, participation ratio, ablation",
    "tracking": "the MLflow store or server",
    "recipe": "a toy model's training recipe; pick it as recipe@model.recipe=NAME",
    "live": "live screening while a toy trains, checkpoints saved where the counts move (live=adaptive)",
}


def _wrap(items: Iterable[str], indent: str = "    ") -> str:
    return textwrap.fill(", ".join(items), width=100, initial_indent=indent, subsequent_indent=indent)


def default_options() -> Dict[str, str]:
    """The option each group takes by default (the defaults list of ``conf/config.yaml``)."""
    defaults = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml")).get("defaults", [])
    return {key: str(value) for entry in defaults if isinstance(entry, dict)
            for key, value in entry.items() if "/" not in key and " " not in key}


def model_rows() -> List[List[str]]:
    """One row per registered model: name, family, revision source, where it comes from."""
    rows = []
    for name in group_options("model"):
        node = OmegaConf.load(option_file("model", name))
        if "name" not in node:  # a short name: its defaults list points at the full entry
            target = next((d for d in node.get("defaults", []) if isinstance(d, str) and d != "_self_"), "?")
            rows.append([name, "", "", f"= {target}"])
            continue
        where = node.get("repo") or node.get("path") or ("trained here (toy)" if node.get("revisions") == "toy" else "")
        rows.append([name, str(node.get("family", "")), str(node.get("revisions", "")), str(where)])
    return rows


def _table(rows: List[List[str]], header: List[str], indent: str = "  ") -> str:
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    return "\n".join(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows)


def registries_text() -> str:
    """The whole help text (plain; Hydra's template needs ``$`` doubled, done by the resolver)."""
    defaults = default_options()
    parts = [
        "emergence: screen the attention heads of language-model checkpoints, one MLflow run per",
        "(model, revision, corpus, screen); then `python -m stats` on the curves.",
        "",
        "Usage:",
        "  python -m emergence [group=option ...] [key=value ...]   one job (every revision it selects)",
        "  python -m emergence -m group=a,b ... [key=a,b ...]        a sweep: one job per revision",
        "  python -m emergence ... dry_run=true                      list the planned jobs, offline, and exit",
        "  python -m emergence ... --cfg job                         print the composed config",
        "",
        "== Config groups (group=option; * = default) ==",
    ]
    for group in GROUPS:
        options = [o + ("*" if defaults.get(group) == o else "") for o in group_options(group)]
        parts.append(f"  {group}: {GROUP_DOC.get(group, '')}")
        parts.append(_wrap(options))
    parts += ["", "== Registered models (conf/model/*.yaml; add one with a YAML file) ==",
              _table(model_rows(), ["name", "family", "revisions", "repo / folder"])]
    parts += ["", "== Head classes (screen.classes; thresholds screen.thresholds.<class>) ==",
              _wrap(config.HEAD_CLASSES)]
    parts += ["", "== Families (architectures with an adapter; model.family) ==", _wrap(config.FAMILIES)]
    parts += ["", "== Model sources (model.revisions: where a model's revisions come from) ==",
              _wrap(config.MODEL_SOURCES)]
    parts += ["",
              "== Files ==",
              f"  config tree: {CONF_DIR}",
              f"  your configs: {', '.join(str(d) for d in config_dirs()[1:]) or 'none'}  "
              "($EMERGENCE_HOME/conf, --config-dir DIR, hydra.searchpath=[file://DIR])",
              f"  outputs:     {emergence_home() / 'outputs'}  ($EMERGENCE_HOME/outputs when set, else ./outputs)",
              "",
              "Hydra's own flags (-m, --cfg, --multirun, ...): python -m emergence --hydra-help"]
    return "\n".join(parts)


def register_resolver() -> None:
    """Register ``${emergence_help:}`` (the app's ``hydra.help.template``: this text, with ``$``
    doubled for Hydra's ``string.Template``)."""
    if not OmegaConf.has_resolver("emergence_help"):
        OmegaConf.register_new_resolver("emergence_help", lambda: registries_text().replace("$", "$$"))


if __name__ == "__main__":
    print(registries_text())
