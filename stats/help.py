"""The text of ``python -m stats --help``: the source group, the source kinds and the classes.

``conf/stats.yaml`` sets ``hydra.help.template`` to the ``${stats_help:}`` resolver
(registered in ``stats/__init__.py``). Everything listed is read from where it is
defined: the ``source`` options from ``<conf>/source/*.yaml``, the source kinds from
the source registry (:mod:`stats.sources`) and the classes (the threshold fields) from
:mod:`stats.config`.
"""

from __future__ import annotations

import dataclasses
import textwrap

from omegaconf import OmegaConf

from stats.config import ThresholdsConfig
from stats.paths import CONF_DIR, emergence_home
from stats.sources import kinds
from stats.units import UNITS


def default_source() -> str:
    """The ``source`` option ``stats.yaml``'s defaults list names."""
    defaults = OmegaConf.load(CONF_DIR / "stats.yaml").get("defaults", [])
    return next((str(entry["source"]) for entry in defaults if OmegaConf.is_dict(entry) and "source" in entry), "")


def help_text() -> str:
    classes = [f"{f.name} ({f.default:g}x)" if isinstance(f.default, (int, float)) else f.name
               for f in dataclasses.fields(ThresholdsConfig)]
    sources = [(path.stem, str(OmegaConf.load(path).get("kind", "")))
               for path in sorted((CONF_DIR / "source").glob("*.yaml"))]
    width = max(len(name) for name, _ in sources)
    default = default_source()
    parts = [
        "stats: the statistics suite over tracked screen runs (or a CSV / per-head table): is a",
        "transition sharp or gradual, when does it happen, how far apart are the induction and",
        "attention-sink transitions, and is the separation real.",
        "",
        "Usage:",
        "  python -m stats [source=option] [key=value ...]     e.g. source=xu2026 analysis.n_boot=200",
        "  python -m stats ... --cfg job                        print the composed config",
        "",
        "== Config group source (source=option; * = default) ==",
    ]
    parts += [f"  {(name + ('*' if name == default else '')).ljust(width + 1)}  kind {kind}" for name, kind in sources]
    parts += ["", "== Source kinds (source.kind) ==", "  " + ", ".join(kinds())]
    parts += ["", "== Classes and their default thresholds (analysis.thresholds.<class>) ==",
              textwrap.fill(", ".join(classes), width=100, initial_indent="  ", subsequent_indent="  "),
              textwrap.fill("Thresholds are in the unit of the class's per-head values (source.units.<class>: auto, "
                            f"{', '.join(f'{u.name} = {u.description}' for u in UNITS.values())}; auto: the source's "
                            "own, else all values in [0, 1] are scores); a score needs its own thresholds in (0, 1].",
                            width=100, initial_indent="  ", subsequent_indent="  ")]
    parts += ["",
              "== Files ==",
              f"  config tree: {CONF_DIR} (stats.yaml, source/)",
              f"  outputs:     {emergence_home() / 'outputs' / 'stats'}  ($EMERGENCE_HOME/outputs when set, "
              "else ./outputs)",
              "",
              "Hydra's own flags: python -m stats --hydra-help"]
    return "\n".join(parts)


if __name__ == "__main__":
    print(help_text())
