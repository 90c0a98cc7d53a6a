"""Source kind ``csv``: curves measured elsewhere, a CSV of counts.

Columns ``model,class,tokens,k,n`` (optional ``layer``, ``revision``, ``pretraining_corpus``,
and ``seed`` / ``seed_kind`` for the training runs of a seed suite). The counts have no head
identity, so the analysis treats them as independent draws (:mod:`stats.shape`, the
``aggregate`` regime). ``python -m stats source=csv source.path=FILE``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from emergence.common import head_classes
from stats.errors import StatsError
from stats.sources import Source, needs_path, path_logged, read_table, resolved
from stats.tracked import CURVE_COLUMNS, LAYER_COLUMNS, TrackedResults, dedupe_tokens, label_seeds

CSV_REQUIRED = ("model", "class", "tokens", "k", "n")
CSV_OPTIONAL = ("layer", "revision", "pretraining_corpus", "seed", "seed_kind")


def filled_revisions(df: pd.DataFrame) -> pd.Series:
    """Each row's revision name: its ``revision`` cell; an empty cell (or no column) takes the name
    the other rows of the same model and token count give, else ``t<tokens>``."""
    by_tokens = df["tokens"].map(lambda t: f"t{int(t)}")
    if "revision" not in df.columns:
        return by_tokens
    given = df["revision"].where(df["revision"].notna(), "").astype(str).str.strip()
    named = df.assign(_r=given)[given != ""].groupby(["model", "tokens"])["_r"].agg(
        lambda names: names.iloc[0] if names.nunique() == 1 else None)
    fill = [named.get((m, t)) or by_tokens[i] for i, m, t in zip(df.index, df["model"], df["tokens"])]
    return given.where(given != "", pd.Series(fill, index=df.index))


def read_csv(path) -> TrackedResults:
    """Read curves measured elsewhere (columns: module docstring; with ``seed``: one set of curves per
    (model, seed), pooled by model, :func:`label_seeds`). Rows with an empty ``layer`` are whole-model
    counts, others per-layer counts (:func:`whole_and_layer_counts`); an empty ``revision`` takes the
    name other rows give the same model and token count (:func:`filled_revisions`)."""
    path = Path(path)
    where = f"CSV {str(path)!r}"
    df = read_table(path, "CSV file", "CSV")
    missing = [c for c in CSV_REQUIRED if c not in df.columns]
    if missing:
        raise StatsError(f"{where} lacks column(s) {missing}; required: {list(CSV_REQUIRED)}, optional: {list(CSV_OPTIONAL)}")
    extra = [c for c in df.columns if c not in CSV_REQUIRED + CSV_OPTIONAL]
    if df.empty:
        raise StatsError(f"{where} has no rows")
    df = checked_counts(df, where)
    df["model"] = df["model"].astype(str)
    df["class"] = df["class"].astype(str)
    check_classes(df["class"], where)
    df, seeds = label_seeds(df, where)  # one curve per (model, seed), named per training run
    df["revision"] = filled_revisions(df)
    if "pretraining_corpus" not in df.columns:
        df["pretraining_corpus"] = "unknown"
    if "layer" not in df.columns:
        df["layer"] = np.nan
    whole, layers = whole_and_layer_counts(df, where)
    notes = [f"ignored CSV columns: {extra}"] if extra else []
    return TrackedResults(curves=dedupe_tokens(whole[CURVE_COLUMNS].reset_index(drop=True)),
                          layers=layers.reset_index(drop=True), heads=None,
                          source={"kind": "csv", "path": str(path.resolve())}, notes=notes, seeds=seeds,
                          counts_only=True)


def check_classes(classes: pd.Series, where: str) -> None:
    """Refuse (one line) a class name that is not a head class of the registry
    (emergence/common/head_classes/): the row, the name, the valid ones."""
    valid = head_classes.names()
    bad = ~classes.isin(valid)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise StatsError(f"{where} column 'class' row {row}: {classes.iloc[row]!r} is not a head class; "
                         f"valid: {', '.join(valid)}")


def checked_counts(df: pd.DataFrame, where: str) -> pd.DataFrame:
    """``df`` with ``tokens``, ``k``, ``n`` as numbers; refuses (one line naming the row) a value that is
    not a number, a negative or non-finite token count, a count that is not an integer >= 0, k > n."""
    for col in ("tokens", "k", "n"):
        vals = pd.to_numeric(df[col], errors="coerce")
        if vals.isna().any():
            row = int(np.flatnonzero(vals.isna().to_numpy())[0])
            raise StatsError(f"{where} column {col!r} row {row}: {df[col].iloc[row]!r} is not a number")
        bad = (vals < 0) | ~np.isfinite(vals) | ((vals != np.round(vals)) if col != "tokens" else False)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            kind = "a token count (a finite number >= 0)" if col == "tokens" else "a count (an integer >= 0)"
            value = df[col].iloc[row]
            shown = repr(value) if isinstance(value, str) else f"{float(value):g}"
            raise StatsError(f"{where} column {col!r} row {row}: {shown} is not {kind}")
        df[col] = vals
    over = df["k"] > df["n"]
    if over.any():
        row = int(np.flatnonzero(over.to_numpy())[0])
        raise StatsError(f"{where} column 'k' row {row}: k={df['k'].iloc[row]:g} > n={df['n'].iloc[row]:g}; "
                         "every row needs 0 <= k <= n")
    return df


def whole_and_layer_counts(df: pd.DataFrame, where: str) -> tuple:
    """``(whole, layers)``: the whole-model rows (an empty ``layer``) and the per-layer rows; a (model,
    class) with per-layer rows only gets its whole-model counts summed over the layers at each token
    count. Refuses two different rows for one (model, class, tokens, layer)."""
    per_layer = df[df["layer"].notna()].drop_duplicates(["model", "class", "tokens", "revision", "layer", "k", "n"])
    clash = per_layer[per_layer.duplicated(["model", "class", "tokens", "layer"], keep=False)]
    if not clash.empty:  # summing them would count a layer twice
        r = clash.iloc[0]
        raise StatsError(f"{where}: conflicting duplicate rows for (model, class, tokens, layer) = "
                         f"({r['model']!r}, {r['class']!r}, {r['tokens']:.6g}, {int(r['layer'])}); keep one row per layer")
    whole = df[df["layer"].isna()].copy()
    if per_layer.empty:
        return whole, pd.DataFrame({c: pd.Series(dtype=object) for c in LAYER_COLUMNS})  # no per-layer rows
    layers = per_layer.assign(layer=per_layer["layer"].astype(int))[LAYER_COLUMNS]
    have = set(zip(whole["model"], whole["class"]))
    summed = per_layer.groupby(["model", "class", "tokens"], as_index=False).agg(
        k=("k", "sum"), n=("n", "sum"), revision=("revision", "first"), pretraining_corpus=("pretraining_corpus", "first"))
    summed = summed[[(m, c) not in have for m, c in zip(summed["model"], summed["class"])]]
    return pd.concat([whole, summed], ignore_index=True), layers


def read(src) -> TrackedResults:
    """The source's reader: :func:`read_csv` of ``source.path``."""
    return read_csv(resolved(src.path))


SOURCE = Source("csv", read, check=needs_path, logged=path_logged, order=1)
