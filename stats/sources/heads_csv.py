"""Source kind ``heads_csv``: a per-head table (selectivity per class), thresholds applied here.

Columns ``model,revision,tokens,layer,head`` (``step`` optional) and one selectivity column
per class, bare (``bos``, as in the reference study's file) or ``selectivity.bos`` (as in a
run's ``heads.csv``); optional ``pr``, ``pr_corrected``, ``pretraining_corpus``, and
``seed`` / ``seed_kind`` (:mod:`stats.heads` checks them). ``python -m stats
source=heads_csv source.path=FILE``; ``source=xu2026`` is the bundled reference file read
as this kind.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

from emergence.common.contract import FIRST_TOKEN_COLUMN, PR_COLUMNS, PRIMARY_COLUMN, column_class
from emergence.common import head_classes
from stats.errors import StatsError
from stats.heads import (HEADS_OPTIONAL, HEADS_REQUIRED, continuous_from_heads, corpus_map, counts_from_heads,
                         flag_heads, normalise_heads, thresholds_dict, with_units)
from stats.sources import Source, needs_path, path_logged, read_table, resolved
from stats.tracked import TrackedResults, dedupe_tokens, label_seeds


def read_heads_csv(path, thresholds=None, units=None) -> TrackedResults:
    """Read a per-head table (module docstring) into :class:`TrackedResults`, with counts
    at ``thresholds`` (defaults; :func:`stats.analysis.analyse` re-applies its own) and the
    unit of each column (``units``: class -> ``ratio`` / ``score`` / ``auto``, the default: read
    from the values, stats/units.py). ``.gz`` files are read directly."""
    path = Path(path)
    df = read_table(path, "per-head file", "per-head CSV")
    seeds = {}
    if "model" in df.columns:  # one set of heads per (model, seed): named per training run (stats.tracked.label_seeds)
        df, seeds = label_seeds(df.assign(model=df["model"].astype(str)), f"per-head CSV {str(path)!r}")
    known = set(HEADS_REQUIRED + HEADS_OPTIONAL + PR_COLUMNS + (FIRST_TOKEN_COLUMN, PRIMARY_COLUMN))
    check_misspelt_classes([c for c in df.columns if c not in known], f"per-head CSV {str(path)!r}")
    heads, notes = normalise_heads(df, f"per-head CSV {str(path)!r}")
    extra = [c for c in heads.columns if c not in known and column_class(c) is None]
    if extra:
        notes.append(f"ignored per-head columns: {extra}")
    empty = unmeasured_cells(heads)
    if empty:
        notes.append(f"per-head CSV {str(path)!r}: empty cells read as not measured: {empty}")
        print(f"note: {notes[-1]}", file=sys.stderr)
    thr = thresholds_dict(thresholds)
    heads = flag_heads(heads, thr)
    curves, layers = counts_from_heads(heads, thr, corpus_map(heads, None))
    source = {"kind": "heads_csv", "path": str(path.resolve()), "thresholds": thr}
    return with_units(TrackedResults(dedupe_tokens(curves.astype({"k": float, "n": float, "tokens": float})), layers,
                                     heads, continuous_from_heads(heads), source, notes, seeds=seeds), units)


def check_misspelt_classes(columns, where: str) -> None:
    """Refuse (one line) a column that is not a known column but reads like a class's selectivity
    column (``bso`` for ``bos``): left out, it would drop that class's curve with a note only."""
    names = head_classes.names()
    for column in map(str, columns):
        bare = column_class(column) or column
        if bare in names:
            continue
        close = difflib.get_close_matches(bare, names, n=1, cutoff=0.6)
        if close or column_class(column) is not None:
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise StatsError(f"{where} column {column!r} is not a head class{hint}; valid class columns: "
                             f"{', '.join(names)} (bare or selectivity.<class>)")


def unmeasured_cells(heads) -> str:
    """How many cells of each class column were empty (not measured), per model: ``bos: 3 of 144
    (pythia-70m)``; "" when none were."""
    parts = []
    for column in [c for c in heads.columns if column_class(c) is not None and c.startswith("selectivity.")]:
        missing = heads[column].isna().groupby(heads["model"]).agg(["sum", "size"])
        for model, (n_missing, n_cells) in missing.iterrows():
            if n_missing:
                parts.append(f"{column_class(column)}: {int(n_missing)} of {int(n_cells)} ({model})")
    return "; ".join(parts)


def read(src) -> TrackedResults:
    """The source's reader: :func:`read_heads_csv` of ``source.path`` (counts at the default thresholds;
    the analysis re-applies its own)."""
    return read_heads_csv(resolved(src.path), units=getattr(src, "units", None))


SOURCE = Source("heads_csv", read, check=needs_path, logged=path_logged, order=2)
