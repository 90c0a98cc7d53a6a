"""Source kind ``heads_csv``: a per-head table (selectivity per class), thresholds applied here.

Columns ``model,revision,tokens,layer,head`` (``step`` optional) and one selectivity column
per class, bare (``bos``, as in the reference study's file) or ``selectivity.bos`` (as in a
run's ``heads.csv``); optional ``pr``, ``pr_corrected``, ``pretraining_corpus``, and
``seed`` / ``seed_kind`` (:mod:`stats.heads` checks them). ``python -m stats
source=heads_csv source.path=FILE``; ``source=xu2026`` is the bundled reference file read
as this kind.
"""

from __future__ import annotations

from pathlib import Path

from emergence.contract import FIRST_TOKEN_COLUMN, PR_COLUMNS, PRIMARY_COLUMN, column_class
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
    heads, notes = normalise_heads(df, f"per-head CSV {str(path)!r}")
    known = set(HEADS_REQUIRED + HEADS_OPTIONAL + PR_COLUMNS + (FIRST_TOKEN_COLUMN, PRIMARY_COLUMN))
    extra = [c for c in heads.columns if c not in known and column_class(c) is None]
    if extra:
        notes.append(f"ignored per-head columns: {extra}")
    thr = thresholds_dict(thresholds)
    heads = flag_heads(heads, thr)
    curves, layers = counts_from_heads(heads, thr, corpus_map(heads, None))
    source = {"kind": "heads_csv", "path": str(path.resolve()), "thresholds": thr}
    return with_units(TrackedResults(dedupe_tokens(curves.astype({"k": float, "n": float, "tokens": float})), layers,
                                     heads, continuous_from_heads(heads), source, notes, seeds=seeds), units)


def read(src) -> TrackedResults:
    """The source's reader: :func:`read_heads_csv` of ``source.path`` (counts at the default thresholds;
    the analysis re-applies its own)."""
    return read_heads_csv(resolved(src.path), units=getattr(src, "units", None))


SOURCE = Source("heads_csv", read, check=needs_path, logged=path_logged, order=2)
