"""Per-head tables: read and check them, and apply selectivity thresholds at analysis time.

A per-head table has one row per (model, revision, layer, head) with the columns
``model, revision, tokens, layer, head`` (``step`` optional), one selectivity column
per class ``c`` named either ``c`` (the reference study's file) or
``selectivity.c`` (a run's ``heads.csv``), and optionally ``pr``, ``pr_corrected``,
``pretraining_corpus``, and ``seed`` / ``seed_kind`` for the training runs of a seed suite
(one set of heads per (model, seed), :func:`stats.tracked.label_seeds`). :func:`normalise_heads` renames selectivities to
``selectivity.c``; the source kind ``heads_csv`` (:mod:`stats.sources.heads_csv`) reads such a file.

Values (:func:`normalise_heads`): a selectivity is a finite number >= 0 or empty (not
measured); a run's own ``heads.csv`` may also hold +inf (a head whose baseline keys got no
attention mass). Anything else (text, ``nan`` written out, a negative or infinite value in a
file, a negative token count) is refused in one line naming the file, row and column.

Thresholds (:func:`apply_thresholds`). With threshold tau_c > 0, head h is flagged c
at revision r when S_c(h, r) >= tau_c (an empty selectivity is not flagged, +inf is),
and its primary class is the flagged class with the largest S_c / tau_c.
From the flags:

    k_c(m, r)    = sum over heads of model m at revision r of flag_c,   n(m, r) = #heads,
    k_c(m, r, l) = the same over the heads of layer l,                  n(m, r, l) = #heads in l,

the whole-model and per-layer curves of :mod:`stats.tracked`. A (model, revision)
whose selectivity of c is empty for every head carries no per-head data for c; its
count, if any, stays the one logged by the screen (``count.c`` metric), with a note.
So a study is re-read at other thresholds without screening again.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, is_dataclass
from typing import Mapping, Optional

import numpy as np
import pandas as pd

from emergence.common import head_classes
from emergence.common.contract import (FIRST_TOKEN_COLUMN, HEAD_KEY_COLUMNS, PR_COLUMNS, PR_MEAN_METRIC,
    PRIMARY_COLUMN, column_class, flag_column, mean_selectivity_metric, selectivity_column)
from stats.errors import StatsError
from stats.tracked import CONTINUOUS_COLUMNS, CURVE_COLUMNS, LAYER_COLUMNS, TrackedResults, dedupe_tokens
from stats.units import AUTO, UNITS, detect_unit, threshold_problem

HEADS_REQUIRED = ("model", "revision", "tokens") + HEAD_KEY_COLUMNS
HEADS_OPTIONAL = ("step", "pr", "pr_corrected", "pretraining_corpus", "seed", "seed_kind")
#: numeric per-head columns besides the selectivities (checked when present)
_NUMERIC_OPTIONAL = ("step",) + PR_COLUMNS + (FIRST_TOKEN_COLUMN,)
KEY = ["model", "revision"] + list(HEAD_KEY_COLUMNS)


def thresholds_dict(thresholds=None) -> dict:
    """Validated ``{class: threshold}`` from a :class:`ThresholdsConfig`, a mapping
    (missing classes get the defaults) or None (the defaults)."""
    classes = head_classes.names()
    if thresholds is None:
        return head_classes.default_thresholds()
    if is_dataclass(thresholds):
        thresholds = asdict(thresholds)
    if not isinstance(thresholds, Mapping):
        raise StatsError(f"analysis.thresholds={thresholds!r}: expected a mapping class -> threshold over {list(classes)}")
    out = head_classes.default_thresholds()
    for c, v in thresholds.items():
        if c not in classes:
            raise StatsError(f"analysis.thresholds.{c}: unknown class {c!r}; valid classes: {list(classes)}")
        try:
            v = float(v)
        except (TypeError, ValueError):
            v = float("nan")
        if not (math.isfinite(v) and v > 0):
            raise StatsError(f"analysis.thresholds.{c}={thresholds[c]!r}: must be a positive finite number "
                             "(in the unit of the class's per-head values)")
        out[c] = v
    return out


def resolve_units(heads: pd.DataFrame, declared: Optional[Mapping] = None, default: Optional[str] = None) -> dict:
    """``{class: unit name}`` of every selectivity column of ``heads`` (stats/units.py): the unit
    ``declared`` for the class unless ``auto``; else the source's ``default`` (a run's ``heads.csv``:
    ``ratio``); else :func:`stats.units.detect_unit` of the undeclared columns together (a ratio
    column of a class no head shows can lie below 1 throughout; a table mixing units declares them)."""
    declared = dict(declared or {})
    columns = selectivity_columns(heads.columns)
    auto = [col for c, col in columns.items() if declared.get(c, AUTO) not in UNITS]
    found = default if default in UNITS else detect_unit(heads[auto].to_numpy(float).ravel() if auto else []).name
    return {c: declared[c] if declared.get(c, AUTO) in UNITS else found for c in columns}


def with_units(results: TrackedResults, units=None, default: Optional[str] = None) -> TrackedResults:
    """``results`` with each per-head column's unit (:func:`resolve_units`; ``units``: a ``UnitsConfig``, a
    mapping or None, ``auto`` left out) in ``source["units"]``, and a note for each column read as a
    score from its values."""
    if results.heads is None:
        return results
    units = asdict(units) if is_dataclass(units) else units
    declared = {str(c): str(u) for c, u in dict(units or {}).items() if str(u) != AUTO}
    unit_map = resolve_units(results.heads, declared, default)
    notes = [f"{c}: every per-head value lies in [0, 1]: read as a score in [0, 1], thresholds in (0, 1] "
             f"(source.units.{c}=auto; set source.units.{c}=ratio for a selectivity)" for c, u in unit_map.items()
             if u == "score" and c not in declared and default is None]
    source = dict(results.source) | {"units": unit_map, "declared_units": declared}
    return dataclasses.replace(results, source=source, notes=results.notes + notes)


def selectivity_columns(columns) -> dict:
    """``{class: column}`` of the selectivity columns present: every ``selectivity.<c>``
    column, and a bare ``c`` column of a registered class without one (the reference
    study's file). Registered classes first, in registry order."""
    cols = list(columns)
    out = {}
    for c in head_classes.names():
        if selectivity_column(c) in cols:
            out[c] = selectivity_column(c)
        elif c in cols:
            out[c] = c
    for col in cols:
        c = column_class(col)
        if c is not None and col == selectivity_column(c) and c not in out:
            out[c] = col
    return out


def _refuse(df: pd.DataFrame, col: str, bad, where: str, why) -> None:
    """Refuse the first row of ``bad`` in one line naming the table, the row and the column;
    ``why(row)`` says what is wrong with its value."""
    if bad.any():
        row = int(np.flatnonzero(np.asarray(bad))[0])
        value = df[col].iloc[row]
        shown = repr(value) if isinstance(value, str) else str(value)
        raise StatsError(f"{where}: column {col!r} row {row}: {shown} {why(row)}")


def _numeric(df: pd.DataFrame, col: str, where: str, allow_nan: bool) -> pd.Series:
    vals = pd.to_numeric(df[col], errors="coerce")
    _refuse(df, col, vals.isna() & (df[col].notna() if allow_nan else True), where, lambda row: "is not a number")
    return vals.astype(float)


def _selectivity(df: pd.DataFrame, col: str, where: str, allow_inf: bool) -> pd.Series:
    """A selectivity column as floats: a number >= 0, or empty (not measured). Refused, naming
    the row and column: text that is not a number (``nan`` written out too), a negative value,
    and an infinite one unless ``allow_inf`` (a run's ``heads.csv``: the screen writes +inf for a
    head whose baseline keys got no attention mass at all, emergence/screens/selectivity.py)."""
    vals = pd.to_numeric(df[col], errors="coerce").astype(float)
    text = vals.isna() & df[col].notna()

    def why(row: int) -> str:
        what = "is not a number" if text.iloc[row] else "is negative" if vals.iloc[row] < 0 else "is not finite"
        r = df.iloc[row]
        return (f"{what} (model {r['model']!r}, revision {r['revision']!r}, layer {r['layer']}, head {r['head']}); "
                "a selectivity is a finite number >= 0 (an empty cell: not measured)")

    _refuse(df, col, text | (vals < 0) | (np.isinf(vals) & (not allow_inf)), where, why)
    return vals


def _tokens(df: pd.DataFrame, where: str) -> pd.Series:
    """The ``tokens`` column: finite numbers >= 0 (a revision's training tokens, the curves' x axis)."""
    vals = _numeric(df, "tokens", where, allow_nan=False)
    _refuse(df, "tokens", (vals < 0) | ~np.isfinite(vals), where,
            lambda row: f"is not a token count, a finite number >= 0 (model {str(df['model'].iloc[row])!r}, "
                        f"revision {str(df['revision'].iloc[row])!r})")
    return vals


def normalise_heads(df: pd.DataFrame, where: str = "per-head table", allow_inf: bool = False) -> tuple:
    """Check a per-head table and bring it to canonical columns; returns ``(heads, notes)``.

    Refuses in one line (:class:`StatsError`): missing columns, no selectivity column, values
    :func:`_numeric`, :func:`_selectivity` (``allow_inf``: the runs' own ``heads.csv``) and
    :func:`_tokens` refuse, non-integer layer/head, one revision with two token counts,
    conflicting duplicate rows for one head. Exact duplicate rows are dropped with a note.
    """
    missing = [c for c in HEADS_REQUIRED if c not in df.columns]
    if missing:
        raise StatsError(f"{where} lacks column(s) {missing}; required: {list(HEADS_REQUIRED)} and a selectivity column "
                         f"per class (`bos` or `selectivity.bos`, ...), optional: {list(HEADS_OPTIONAL)}")
    sel = selectivity_columns(df.columns)
    if not sel:
        raise StatsError(f"{where} has no selectivity column; expected one per class named <class> or selectivity.<class>, "
                         f"classes: {list(head_classes.names())}")
    if df.empty:
        raise StatsError(f"{where} has no rows")
    df = df.copy()
    df[["model", "revision"]] = df[["model", "revision"]].astype(str)
    df["tokens"] = _tokens(df, where)
    for col in ("layer", "head"):
        vals = _numeric(df, col, where, allow_nan=False)
        _refuse(df, col, (vals != np.round(vals)) | (vals < 0), where, lambda row: "is not a non-negative integer")
        df[col] = vals.astype(int)
    renamed = {}
    for c, col in sel.items():
        df[col] = _selectivity(df, col, where, allow_inf)
        renamed[col] = selectivity_column(c)
    bare_and_prefixed = [c for c in sel if sel[c] != c and c in df.columns]
    df = df.drop(columns=bare_and_prefixed).rename(columns=renamed)
    for col in _NUMERIC_OPTIONAL:
        if col in df.columns:
            df[col] = _numeric(df, col, where, allow_nan=True)
    notes = []
    if bare_and_prefixed:
        notes.append(f"{where}: both bare and selectivity.<class> columns for {bare_and_prefixed}; the selectivity.<class> ones are used")
    toks = df.groupby(["model", "revision"])["tokens"].nunique()
    if (toks > 1).any():
        m, r = toks[toks > 1].index[0]
        counts = sorted(df.loc[(df["model"] == m) & (df["revision"] == r), "tokens"].unique())
        raise StatsError(f"{where}: revision {r!r} of model {m!r} has several token counts {counts}")
    dup = df.duplicated(KEY, keep=False)
    if dup.any():
        exact = df.duplicated(keep="first")
        conflicting = df[dup].drop_duplicates().duplicated(KEY, keep=False)
        if conflicting.any():
            first = df[dup].drop_duplicates()[conflicting].iloc[0]
            raise StatsError(f"{where}: conflicting duplicate rows for (model, revision, layer, head) = "
                             f"({first['model']!r}, {first['revision']!r}, {first['layer']}, {first['head']}); keep one row per head")
        notes.append(f"{where}: {int(exact.sum())} exact duplicate row(s) dropped")
        df = df[~exact]
    return df.reset_index(drop=True), notes


def flag_heads(heads: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """``heads`` with ``flag.<c>`` (0/1) and ``primary`` recomputed at ``thresholds``."""
    heads = heads.copy()
    classes = [c for c in selectivity_columns(heads.columns) if selectivity_column(c) in heads.columns
               and c in thresholds]  # a class not in the registry has no threshold: not flagged
    ratios = []
    for c in classes:
        s = heads[selectivity_column(c)].to_numpy(float)
        flag = np.nan_to_num(s, nan=0.0) >= thresholds[c]
        heads[flag_column(c)] = flag.astype(int)
        ratios.append(np.where(flag, s / thresholds[c], -np.inf))
    if classes:
        r = np.stack(ratios, axis=1)
        best = r.argmax(axis=1)
        heads[PRIMARY_COLUMN] = np.where(np.isfinite(r[np.arange(len(r)), best]), np.asarray(classes, dtype=object)[best], "")
    return heads


def class_counts(heads: pd.DataFrame, head_class: str, threshold: float, by_layer: bool = False) -> pd.DataFrame:
    """Counts of heads with S_head_class >= threshold per (model, revision, tokens[, layer]):
    columns ..., k, n. (model, revision) groups whose selectivity is empty for every
    head are left out (no per-head data for the class there)."""
    col = selectivity_column(head_class)
    keys = ["model", "revision", "tokens"]
    if col not in heads.columns:
        return pd.DataFrame(columns=keys + (["layer"] if by_layer else []) + ["k", "n"])
    has = heads[col].notna().groupby([heads["model"], heads["revision"]]).transform("any")
    h = heads[has.to_numpy(bool)]
    flag = (np.nan_to_num(h[col].to_numpy(float), nan=0.0) >= threshold).astype(int)
    h = h.assign(_flag=flag)
    group = keys + (["layer"] if by_layer else [])
    return h.groupby(group, as_index=False, sort=False).agg(k=("_flag", "sum"), n=("head", "size"))


def corpus_map(heads: pd.DataFrame, curves: Optional[pd.DataFrame]) -> dict:
    """model -> its pretraining corpus: from the count table, then (overriding) the per-head table's column."""
    out = {}
    for frame in (curves, heads):
        if frame is not None and "pretraining_corpus" in frame.columns:
            for m, g in frame.groupby("model"):
                vals = g["pretraining_corpus"].dropna().unique()
                if len(vals):
                    out[m] = str(vals[0])
    return out


def counts_from_heads(heads: pd.DataFrame, thresholds: Mapping[str, float], corpus: Optional[dict] = None) -> tuple:
    """Whole-model and per-layer count tables (``CURVE_COLUMNS``, ``LAYER_COLUMNS``) of
    every class with a selectivity column."""
    corpus = corpus or {}
    curves, layers = [], []
    for c in [c for c in selectivity_columns(heads.columns) if c in thresholds]:
        whole = class_counts(heads, c, thresholds[c])
        if whole.empty:
            continue
        whole = whole.assign(**{"class": c, "pretraining_corpus": whole["model"].map(lambda m: corpus.get(m, "unknown"))})
        curves.append(whole[CURVE_COLUMNS])
        lay = class_counts(heads, c, thresholds[c], by_layer=True).assign(**{"class": c})
        layers.append(lay[LAYER_COLUMNS])
    curves = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(columns=CURVE_COLUMNS)
    layers = pd.concat(layers, ignore_index=True) if layers else pd.DataFrame(columns=LAYER_COLUMNS)
    return curves, layers


def apply_thresholds(results: TrackedResults, thresholds=None) -> TrackedResults:
    """``results`` re-read at ``thresholds`` (module docstring): flags and counts of every class with
    per-head selectivities from the per-head table, the other counts as logged, with a note."""
    thr = thresholds_dict(thresholds)
    heads = results.heads
    if heads is None or not selectivity_columns(heads.columns):
        note = "no per-head selectivities: counts as given by the source; analysis.thresholds not applied"
        return dataclasses.replace(results, notes=results.notes + ([] if results.counts_only else [note]))
    units = {**resolve_units(heads), **(results.source.get("units") or {})}
    for c, unit in units.items():
        line = threshold_problem(f"analysis.thresholds.{c}", thr.get(c), c, unit, _unit_origin(results.source, c))
        if c in thr and line:
            raise StatsError(line)
    heads = flag_heads(heads, thr)
    curves, layers = counts_from_heads(heads, thr, corpus_map(heads, results.curves))
    notes = list(results.notes)
    keep = _not_derived(results.curves, curves)
    if not keep.empty:
        for (m, c), g in keep.groupby(["model", "class"]):
            notes.append(f"{m}/{c}: {len(g)} revision(s) without per-head selectivity.{c}: "
                         f"counts from the logged count.{c} metric (the screen's threshold)")
        curves = pd.concat([curves, keep[CURVE_COLUMNS]], ignore_index=True)
    if results.layers is not None and not results.layers.empty:
        keep_l = _not_derived(results.layers, layers)
        layers = pd.concat([layers, keep_l[LAYER_COLUMNS]], ignore_index=True) if not keep_l.empty else layers
    layers = layers.astype({"layer": int, "k": float, "n": float}) if not layers.empty else layers
    curves = dedupe_tokens(curves.astype({"k": float, "n": float, "tokens": float}))
    src = dict(results.source)
    src["thresholds"], src["units"] = thr, units
    return dataclasses.replace(results, curves=curves, layers=layers.reset_index(drop=True), heads=heads, source=src,
                               notes=notes)


def _not_derived(logged: pd.DataFrame, derived: pd.DataFrame) -> pd.DataFrame:
    """The rows of the ``logged`` counts whose (model, class, revision) the ``derived`` ones lack."""
    have = set(zip(derived["model"], derived["class"], derived["revision"]))
    return logged[[key not in have for key in zip(logged["model"], logged["class"], logged["revision"])]]


def _unit_origin(source: Mapping, head_class: str) -> str:
    """How a class's unit was known, for the line refusing a threshold out of its range."""
    declared = (source.get("declared_units") or {}).get(head_class, AUTO)
    if declared != AUTO:
        return f" (source.units.{head_class}={declared})"
    if (source.get("units") or {}).get(head_class) == "score":
        return f" (source.units.{head_class}=auto: every per-head value lies in [0, 1])"
    return ""


def continuous_from_heads(heads: pd.DataFrame) -> pd.DataFrame:
    """Continuous metrics of a per-head table: ``mean_selectivity.<c>`` (mean over heads,
    infinite values left out) and ``pr.mean`` per (model, revision)."""
    rows = []
    for (m, r, t), g in heads.groupby(["model", "revision", "tokens"], sort=False):
        for c in selectivity_columns(g.columns):
            col = selectivity_column(c)
            if col in g.columns:
                v = g[col].to_numpy(float)
                v = v[np.isfinite(v)]
                if v.size:
                    rows.append((m, r, float(t), mean_selectivity_metric(c), float(v.mean())))
        if "pr" in g.columns and g["pr"].notna().any():
            rows.append((m, r, float(t), PR_MEAN_METRIC, float(g["pr"].mean())))
    return pd.DataFrame(rows, columns=CONTINUOUS_COLUMNS)
