"""Curves: read tracked screen runs (MLflow) or a CSV into tidy tables.

A *curve* is k(t): the number ``k`` of ``n`` heads flagged for one class at the
revisions of one model, with their training-token counts ``t``.

Tables of a :class:`TrackedResults` (pandas DataFrames):

- ``curves``: model, pretraining_corpus, class, revision, tokens, k, n - one row per
  (model, class, revision), ``n`` all heads of the model;
- ``layers``: model, class, revision, tokens, layer, k, n - per-layer counts
  (``n`` = heads per layer);
- ``heads``: model, revision, tokens, layer, head, ``selectivity.<class>``,
  ``flag.<class>``, primary, first_token_attention and (when the PR screen ran)
  pr, pr_corrected, pr_samples - one row per head and revision, or None (the runs'
  ``heads.csv``, or a per-head file read by :func:`stats.heads.read_heads_csv`;
  flags and counts are re-derived at the analysis thresholds by
  :func:`stats.heads.apply_thresholds`);
- ``continuous``: model, revision, tokens, metric, value - the continuous metrics
  (mean selectivity, mean first-token attention, induction loss and accuracy, PR).

The names of what a run logs (metrics, params, tags, ``heads.csv`` columns) and a run's
identity come from the run contract, :mod:`emergence.contract`; the head classes from
the registry :mod:`emergence.contract.head_classes` (neither imports model code).

Rules: only runs tagged ``emergence.status = complete`` are read (configurable);
runs are keyed on (model, revision, probe, seed) (:func:`read_mlflow`): several runs of
one key are combined, per metric and column the newest run that has it, with a note; a
model screened on several probes gets one set of curves per probe, named
``<model> [<corpus kind>]``, and a model trained with several seeds (a seed suite, the
``seed`` params; a run without them is seed None) one per seed, ``<model> [seed 3]``,
recorded in :attr:`TrackedResults.seeds` for the pooling (:mod:`stats.pooling`); runs of
one model and probe measured with different screen settings are refused;
revisions with equal token counts are merged (the first by name kept); revisions
with zero tokens (``step0``), no heads or a missing count are kept in the tables but
left out of the curves fitted on log10 tokens (noted by the analysis).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd

from emergence import contract
from emergence.contract import head_classes
from emergence.contract import (
    COUNT,
    HEAD_KEY_COLUMNS,
    HEADS_ARTIFACT,
    LAYER_COUNT,
    MEAN_SELECTIVITY,
    MODEL_PARAM,
    N_HEADS_PARAM,
    N_HEADS_TOTAL_METRIC,
    N_LAYERS_PARAM,
    PRETRAINING_CORPUS_PARAM,
    STATUS_COMPLETE,
    REGISTRY_INDEX_PARAM,
    SEED_KINDS,
    STATUS_TAG,
    SWEEP_TAG,
    TOKENS_PARAM,
    RunIdentity,
    RunSeed,
    parse_metric,
    probe_kind,
)
from emergence.contract.store import sqlite_file
from stats.errors import StatsError



def class_names() -> tuple:
    """The head classes known now (the registry, :mod:`emergence.contract.head_classes`)."""
    return head_classes.names()


#: Whole-model continuous metrics logged per run (Schaeffer et al. 2023: report these too),
#: besides the per-class ``mean_selectivity.<class>`` (recognised by :func:`parse_metric`,
#: whatever classes are registered; read :func:`class_names` at call time, never a copy
#: taken at import, so a class registered later with ``head_classes.register`` counts).
CONTINUOUS_METRICS = contract.CONTINUOUS_METRICS

CURVE_COLUMNS = ["model", "pretraining_corpus", "class", "revision", "tokens", "k", "n"]
LAYER_COLUMNS = ["model", "class", "revision", "tokens", "layer", "k", "n"]
CSV_REQUIRED = ("model", "class", "tokens", "k", "n")
CSV_OPTIONAL = ("layer", "revision", "pretraining_corpus", "seed", "seed_kind")


@dataclass
class Curve:
    """One curve: arrays sorted by tokens (positive tokens only).

    ``identity``: whether the counts follow the *same* heads across revisions (a
    per-head table: ``heads.csv`` of the runs, or a ``heads_csv`` file), so that they
    are cumulative up to flicker; False for aggregate counts (``source=csv``), which
    the analysis treats as independent draws (:mod:`stats.shape`, the two regimes).
    """

    model: str
    cls: str
    revisions: np.ndarray
    tokens: np.ndarray
    k: np.ndarray
    n: np.ndarray
    corpus: str = "unknown"
    dropped: list = field(default_factory=list)
    identity: bool = False
    #: with identity known: the heads' flags, (revisions x heads) booleans in the order of ``revisions``
    flags: Optional[np.ndarray] = None

    @property
    def x(self) -> np.ndarray:
        return np.log10(self.tokens)

    @property
    def fraction(self) -> np.ndarray:
        return self.k / np.where(self.n > 0, self.n, 1)

    def __len__(self):
        return len(self.tokens)

    def head(self, stop: int) -> "Curve":
        """The curve's first ``stop`` revisions (the rise of a curve that falls again)."""
        return Curve(self.model, self.cls, self.revisions[:stop], self.tokens[:stop], self.k[:stop], self.n[:stop],
                     self.corpus, list(self.dropped), self.identity, None if self.flags is None else self.flags[:stop])

    @classmethod
    def from_frame(cls, df: pd.DataFrame, model: str, klass: str, corpus: str = "unknown",
                   identity: bool = False) -> "Curve":
        df = df.sort_values("tokens")
        dropped = []
        bad = (df["tokens"] <= 0) | (df["n"] <= 0) | df["k"].isna() | df["n"].isna() | df["tokens"].isna()
        if bad.any():
            dropped = [f"{r.revision} (tokens={r.tokens}, n={r.n})" for r in df[bad].itertuples()]
            df = df[~bad]
        return cls(
            model=model,
            cls=klass,
            revisions=df["revision"].astype(str).to_numpy(),
            tokens=df["tokens"].to_numpy(float),
            k=df["k"].to_numpy(float),
            n=df["n"].to_numpy(float),
            corpus=corpus,
            dropped=dropped,
            identity=identity,
        )


@dataclass
class TrackedResults:
    """The tidy tables read from a store or a CSV (see module docstring)."""

    curves: pd.DataFrame
    layers: pd.DataFrame
    heads: Optional[pd.DataFrame] = None
    continuous: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["model", "revision", "tokens", "metric", "value"]))
    source: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    #: (model, revision) -> the revision's index in its model's registry (the runs'
    #: ``registry_index`` param; empty for CSV input): which screened revisions are adjacent checkpoints.
    registry_index: dict = field(default_factory=dict)
    #: model name in the tables -> its :class:`emergence.contract.RunSeed` (training run of a seed
    #: suite: seed, kind, group), for the models that are one run of a seed suite; the pooling of
    #: :mod:`stats.pooling` groups them by ``group``. Empty without seeds.
    seeds: dict = field(default_factory=dict)

    def seed_groups(self) -> dict:
        """group -> the model names of its runs (in table order), for groups with a seed."""
        out: dict = {}
        for model in self.models:
            if model in self.seeds:
                out.setdefault(self.seeds[model].group, []).append(model)
        return out

    def registry_between(self, model: str, lo: str, hi: str) -> Optional[int]:
        """Registry revisions strictly between screened revisions ``lo`` and ``hi`` (0: adjacent
        checkpoints); None when the runs do not say."""
        a, b = self.registry_index.get((model, lo)), self.registry_index.get((model, hi))
        return None if a is None or b is None else abs(b - a) - 1

    @property
    def models(self) -> list:
        return sorted(self.curves["model"].unique())

    def classes(self, model: Optional[str] = None) -> list:
        df = self.curves if model is None else self.curves[self.curves["model"] == model]
        present = set(df["class"].unique())
        known = class_names()
        ordered = [c for c in known if c in present]
        return ordered + sorted(present - set(known))

    def corpus(self, model: str) -> str:
        vals = self.curves.loc[self.curves["model"] == model, "pretraining_corpus"].dropna().unique()
        return str(vals[0]) if len(vals) else "unknown"

    def curve(self, model: str, klass: str) -> Curve:
        df = self.curves[(self.curves["model"] == model) & (self.curves["class"] == klass)]
        if df.empty:
            raise StatsError(
                f"no curve for model {model!r} class {klass!r}; models: {self.models}, classes: {self.classes(model)}"
            )
        identity = self.identity_known(model, klass)
        curve = Curve.from_frame(df, model, klass, self.corpus(model), identity)
        if identity:
            curve.flags = self.head_flags(model, klass, curve.revisions)
        return curve

    def head_flags(self, model: str, klass: str, revisions, threshold: Optional[float] = None) -> np.ndarray:
        """(revisions x heads) flags of ``model``'s heads for ``klass``, rows in the order of
        ``revisions``, columns the (layer, head) pairs; a head missing at a revision is unflagged.
        With ``threshold``: flagged at ``selectivity >= threshold`` instead of the table's flags."""
        h = self.heads[self.heads["model"] == model]
        h = h.assign(revision=h["revision"].astype(str))
        if threshold is None:
            h = h.assign(_flag=h[contract.flag_column(klass)])
        else:
            h = h.assign(_flag=(h[contract.selectivity_column(klass)].fillna(0.0) >= threshold).astype(int))
        grid = h.pivot_table(index="revision", columns=["layer", "head"], values="_flag", aggfunc="max")
        return grid.reindex([str(r) for r in revisions]).fillna(0).to_numpy(float) > 0

    def identity_known(self, model: str, klass: str) -> bool:
        """Whether ``model``'s ``klass`` counts follow the same heads: a per-head table with
        that model's flags of that class (see :class:`Curve`)."""
        h = self.heads
        col = contract.flag_column(klass)
        return bool(h is not None and col in h.columns and (h["model"] == model).any())

    def iter_curves(self) -> Iterator[Curve]:
        for model in self.models:
            for klass in self.classes(model):
                yield self.curve(model, klass)

    def has_pr(self) -> bool:
        return self.heads is not None and "pr" in self.heads.columns and self.heads["pr"].notna().any()


# ---------------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------------


def read_table(path: Path, missing: str, unreadable: str) -> pd.DataFrame:
    """A CSV file (``.gz`` too) as a DataFrame; a missing or unreadable file is one
    :class:`StatsError` line naming it (``missing`` / ``unreadable``: what each message calls it).
    Only an empty cell is missing: ``nan``, ``NA`` and the like written out stay text, so a
    numeric column holding them is refused by the checks rather than read as "not measured"."""
    if not path.is_file():
        raise StatsError(f"no such {missing}: {str(path)!r} (source.path must name an existing file)")
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    except Exception as exc:  # pandas raises several types for unreadable files
        raise StatsError(f"cannot read {unreadable} {str(path)!r}: {exc}") from None


def read_csv(path) -> TrackedResults:
    """Read curves measured elsewhere: columns ``model,class,tokens,k,n`` (optional
    ``layer``, ``revision``, ``pretraining_corpus``, and ``seed`` / ``seed_kind`` for the
    training runs of a seed suite: one set of curves per (model, seed), pooled by model,
    :func:`label_seeds`).

    Rows with an empty ``layer`` are whole-model counts; rows with a layer are
    per-layer counts. A (model, class) with only per-layer rows gets its whole-model
    curve by summing the layers at each token count.
    """
    path = Path(path)
    df = read_table(path, "CSV file", "CSV")
    missing = [c for c in CSV_REQUIRED if c not in df.columns]
    if missing:
        raise StatsError(
            f"CSV {str(path)!r} lacks column(s) {missing}; required: {list(CSV_REQUIRED)}, optional: {list(CSV_OPTIONAL)}"
        )
    extra = [c for c in df.columns if c not in CSV_REQUIRED + CSV_OPTIONAL]
    if df.empty:
        raise StatsError(f"CSV {str(path)!r} has no rows")
    for col in ("tokens", "k", "n"):
        vals = pd.to_numeric(df[col], errors="coerce")
        if vals.isna().any():
            row = int(np.flatnonzero(vals.isna().to_numpy())[0])
            raise StatsError(f"CSV {str(path)!r} column {col!r} row {row}: {df[col].iloc[row]!r} is not a number")
        bad = (vals < 0) | ~np.isfinite(vals) | ((vals != np.round(vals)) if col != "tokens" else False)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            kind = "a token count (a finite number >= 0)" if col == "tokens" else "a count (an integer >= 0)"
            value = df[col].iloc[row]
            shown = repr(value) if isinstance(value, str) else f"{float(value):g}"
            raise StatsError(f"CSV {str(path)!r} column {col!r} row {row}: {shown} is not {kind}")
        df[col] = vals
    over = df["k"] > df["n"]
    if over.any():
        row = int(np.flatnonzero(over.to_numpy())[0])
        raise StatsError(f"CSV {str(path)!r} column 'k' row {row}: k={df['k'].iloc[row]:g} > n={df['n'].iloc[row]:g}; "
                         "every row needs 0 <= k <= n")
    df["model"] = df["model"].astype(str)
    df["class"] = df["class"].astype(str)
    df, seeds = label_seeds(df, f"CSV {str(path)!r}")  # one curve per (model, seed), named per training run
    if "revision" not in df.columns:
        df["revision"] = df["tokens"].map(lambda t: f"t{int(t)}")
    df["revision"] = df["revision"].astype(str)
    if "pretraining_corpus" not in df.columns:
        df["pretraining_corpus"] = "unknown"
    if "layer" not in df.columns:
        df["layer"] = np.nan
    per_layer = df[df["layer"].notna()].drop_duplicates(["model", "class", "tokens", "revision", "layer", "k", "n"])
    clash = per_layer[per_layer.duplicated(["model", "class", "tokens", "layer"], keep=False)]
    if not clash.empty:  # summing them would count a layer twice
        r = clash.iloc[0]
        raise StatsError(f"CSV {str(path)!r}: conflicting duplicate rows for (model, class, tokens, layer) = "
                         f"({r['model']!r}, {r['class']!r}, {r['tokens']:.6g}, {int(r['layer'])}); keep one row per layer")
    whole = df[df["layer"].isna()].copy()
    layers = per_layer.assign(layer=per_layer["layer"].astype(int))[LAYER_COLUMNS] if not per_layer.empty else _empty(LAYER_COLUMNS)
    if not per_layer.empty:
        have = set(zip(whole["model"], whole["class"]))
        summed = (
            per_layer.groupby(["model", "class", "tokens"], as_index=False)
            .agg(k=("k", "sum"), n=("n", "sum"), revision=("revision", "first"), pretraining_corpus=("pretraining_corpus", "first"))
        )
        summed = summed[[(m, c) not in have for m, c in zip(summed["model"], summed["class"])]]
        whole = pd.concat([whole, summed], ignore_index=True)
    curves = _dedupe_tokens(whole[CURVE_COLUMNS].reset_index(drop=True))
    notes = [f"ignored CSV columns: {extra}"] if extra else []
    return TrackedResults(curves=curves, layers=layers.reset_index(drop=True), heads=None,
                          source={"kind": "csv", "path": str(path.resolve())}, notes=notes, seeds=seeds)


def _empty(cols):
    return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})


def _dedupe_tokens(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, class, tokens); ties in tokens are refused.

    Curves are fitted on log10 tokens, so two different revisions at the same token
    count cannot both be points, and picking one silently would hide data: a tie is an
    error naming both revisions. Rows repeated exactly (same revision and counts) are
    kept once; the same revision with different counts is an error too.
    """
    curves = curves.sort_values(["model", "class", "tokens", "revision"])
    curves = curves.drop_duplicates(["model", "class", "tokens", "revision", "k", "n"])
    clash = curves[curves.duplicated(["model", "class", "tokens"], keep=False)]
    if not clash.empty:
        first = clash.iloc[0]
        same = clash[(clash["model"] == first["model"]) & (clash["class"] == first["class"])
                     & (clash["tokens"] == first["tokens"])]
        revs = sorted(set(map(str, same["revision"])))
        if len(revs) > 1:
            raise StatsError(f"model {first['model']!r}: revisions {revs} have the same token count "
                             f"{first['tokens']:.6g}; a curve needs one revision per token count (drop one, "
                             "or give each its own tokens)")
        raise StatsError(f"model {first['model']!r} class {first['class']!r} revision {revs[0]!r}: conflicting "
                         f"counts {sorted(zip(same['k'], same['n']))} (k, n); keep one row per revision")
    return curves.reset_index(drop=True)


# ---------------------------------------------------------------------------------
# MLflow
# ---------------------------------------------------------------------------------


def _client(tracking_uri: str):
    from mlflow.tracking import MlflowClient

    path = sqlite_file(tracking_uri)
    if path is not None and not path.is_file():
        raise StatsError(f"no MLflow store at {str(path)!r} (tracking_uri={tracking_uri!r}); run a sweep first or pass source=csv")
    if tracking_uri.startswith("file:"):
        local = Path(unquote(urlparse(tracking_uri).path))
        if not local.exists():
            raise StatsError(f"no MLflow store at {str(local)!r} (tracking_uri={tracking_uri!r})")
    return MlflowClient(tracking_uri=tracking_uri)


def _search_all(client, experiment_id: str, filter_string: str):
    runs, token = [], None
    while True:
        page = client.search_runs([experiment_id], filter_string=filter_string or "", max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def read_mlflow(
    tracking_uri: str,
    experiment: str = "emergence",
    filter_string: Optional[str] = None,
    sweep: Optional[str] = None,
    models: Optional[Iterable[str]] = None,
    status: Optional[str] = STATUS_COMPLETE,
    read_heads: bool = True,
) -> TrackedResults:
    """Read the screen runs of an MLflow experiment into tidy tables.

    ``filter_string`` is an MLflow search filter; ``sweep`` keeps the runs tagged
    ``emergence.sweep`` with that id (``latest``: the sweep of the newest run);
    ``models`` keeps those registry names; ``status`` the runs whose
    ``emergence.status`` tag equals it (None: all). ``read_heads`` downloads each
    run's ``heads.csv`` artifact for the per-head analyses.

    Runs are points of curves by their identity (:class:`emergence.contract.RunIdentity`):
    model, revision, probe and seed. Several runs of one point (a ``screen=bos`` run after a
    ``screen=all`` one, a forced rerun) are combined: per metric and per ``heads.csv``
    column, the newest run that has it (so an old run that logged only ``count.bos``
    loses nothing), with a note. A model screened on several probes gets one set of
    curves per probe, named ``<model> [<corpus kind>]`` (``[<probe key>]`` when two
    probes share a kind), and one per training run when it is a seed suite (the runs'
    ``seed`` params, :func:`emergence.contract.run_seed`), named ``<model> [seed 3]``. Runs
    of one model and probe measured with different screen settings
    (:func:`emergence.contract.measure_key`: the recipe, the local window, ...) are refused
    in one line.
    """
    client = _client(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = sorted(e.name for e in client.search_experiments())
        raise StatsError(f"no experiment {experiment!r} in {tracking_uri!r}; experiments: {names}")
    try:
        runs = _search_all(client, exp.experiment_id, filter_string)
    except Exception as exc:
        raise StatsError(f"MLflow search failed for filter {filter_string!r}: {exc}") from None
    what = f"experiment {experiment!r}" + (f" with filter {filter_string!r}" if filter_string else "")
    runs = [r for r in runs if MODEL_PARAM in r.data.params and TOKENS_PARAM in r.data.params]
    if status:
        runs = [r for r in runs if r.data.tags.get(STATUS_TAG) == status]
    if not runs:
        others = sorted(e.name for e in client.search_experiments() if e.name != experiment)
        hint = f"; status filter {status!r} (source.status=null reads all)" if status else ""
        raise StatsError(f"no {status or ''} screen runs in {what} at {tracking_uri!r}{hint}; "
                         f"other experiments: {others}".replace("  ", " "))
    if sweep:
        sweeps = {r.data.tags.get(SWEEP_TAG) for r in runs} - {None}
        if sweep == "latest":
            sweep = max(runs, key=lambda r: r.info.start_time).data.tags.get(SWEEP_TAG)
        if sweep not in sweeps:
            raise StatsError(f"no runs of sweep {sweep!r} in {what}; sweeps: {sorted(sweeps)}")
        runs = [r for r in runs if r.data.tags.get(SWEEP_TAG) == sweep]
    if models:
        models = list(models)
        present = sorted({r.data.params[MODEL_PARAM] for r in runs})
        unknown = [m for m in models if m not in present]
        if unknown:
            raise StatsError(f"model(s) {unknown} not in {what}; models: {present}")
        runs = [r for r in runs if r.data.params[MODEL_PARAM] in models]

    points, labels, notes, seeds = group_runs(runs)
    curve_rows, layer_rows, cont_rows, head_frames = [], [], [], []
    registry_index: dict = {}
    tmp = tempfile.TemporaryDirectory() if read_heads else None
    for identity, group in points.items():
        model = labels[(identity.model, identity.probe, identity.seed)]
        p = combined(r.data.params for r in group)
        m = combined(r.data.metrics for r in group)
        revision = identity.revision
        try:
            tokens = float(p[TOKENS_PARAM])
        except ValueError:
            raise StatsError(f"run {group[0].info.run_id}: param tokens={p[TOKENS_PARAM]!r} is not a number") from None
        if not (np.isfinite(tokens) and tokens >= 0):
            raise StatsError(f"run {group[0].info.run_id}: param tokens={p[TOKENS_PARAM]!r} is not a token count "
                             "(a finite number >= 0)")
        corpus = p.get(PRETRAINING_CORPUS_PARAM, "unknown")
        if str(p.get(REGISTRY_INDEX_PARAM, "")).isdigit():
            registry_index[(model, revision)] = int(p[REGISTRY_INDEX_PARAM])
        n_total = m.get(N_HEADS_TOTAL_METRIC)
        if n_total is None and N_LAYERS_PARAM in p and N_HEADS_PARAM in p:
            n_total = int(p[N_LAYERS_PARAM]) * int(p[N_HEADS_PARAM])
        n_heads = int(p[N_HEADS_PARAM]) if N_HEADS_PARAM in p else None
        for key, val in m.items():
            parsed = parse_metric(key)
            if parsed is not None and parsed.kind == COUNT:
                if n_total is None:
                    raise StatsError(f"run {group[0].info.run_id}: no n_heads_total metric nor n_layers/n_heads params")
                curve_rows.append((model, corpus, parsed.head_class, revision, tokens, val, n_total))
            elif parsed is not None and parsed.kind == LAYER_COUNT and n_heads is not None:
                layer_rows.append((model, parsed.head_class, revision, tokens, parsed.layer, val, n_heads))
            if key in CONTINUOUS_METRICS or (parsed is not None and parsed.kind == MEAN_SELECTIVITY):
                cont_rows.append((model, revision, tokens, key, val))
        if read_heads:
            frames = [_read_heads(client, r, tmp.name) for r in group]
            heads = combined_heads([f for f in frames if f is not None])
            if heads is not None:
                heads.insert(0, "tokens", tokens)
                heads.insert(0, "revision", revision)
                heads.insert(0, "model", model)
                head_frames.append(heads)
    if tmp is not None:
        tmp.cleanup()
    if not curve_rows:
        raise StatsError(f"runs in {what} have no count.<class> metrics; classes expected: {list(class_names())}")
    curves = _dedupe_tokens(pd.DataFrame(curve_rows, columns=CURVE_COLUMNS))
    layers = pd.DataFrame(layer_rows, columns=LAYER_COLUMNS)
    continuous = pd.DataFrame(cont_rows, columns=["model", "revision", "tokens", "metric", "value"])
    heads = pd.concat(head_frames, ignore_index=True) if head_frames else None
    if read_heads and heads is None:
        notes.append("no heads.csv artifacts: per-head analyses skipped")
    if heads is not None:
        from stats.heads import normalise_heads, selectivity_columns

        if selectivity_columns(heads.columns):
            heads, head_notes = normalise_heads(heads, "heads.csv of the runs", allow_inf=True)
            notes += head_notes
        else:
            notes.append("heads.csv artifacts have no selectivity.<class> column: counts from the logged count.<class> metrics")
    source = {"kind": "mlflow", "tracking_uri": tracking_uri, "experiment": experiment, "filter": filter_string,
              "sweep": sweep, "n_runs": sum(len(g) for g in points.values()), "n_points": len(points),
              "probes": {label: probe for (_, probe, _), label in labels.items()}}
    return TrackedResults(curves=curves, layers=layers, heads=heads, continuous=continuous, source=source, notes=notes,
                          registry_index=registry_index, seeds=seeds)


def group_runs(runs) -> tuple:
    """Group runs by identity; returns ``(points, labels, notes, seeds)``.

    ``points``: :class:`RunIdentity` -> its runs, newest first; ``labels``: (model, probe
    key, seed) -> the model name used in the tables (the bare name when the model has one
    probe and one seed; else ``<model> [<corpus kind>]`` and ``... [seed 3]``, see
    :func:`seed_label`); ``seeds``: that name -> its :class:`RunSeed`, whose group is the
    model's (probe) name unless the runs logged another ``seed_group``. Refuses
    (:class:`StatsError`) runs of one model and probe whose measure settings differ, and runs
    of one point whose head layout (n_layers, n_heads) differs.
    """
    runs = sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id), reverse=True)
    points: dict = {}
    measures: dict = {}
    for r in runs:
        identity = RunIdentity.from_params(r.data.params)
        points.setdefault(identity, []).append(r)
        measures.setdefault((identity.model, identity.probe), {}).setdefault(identity.measure, r)
    for (model, probe), by_measure in measures.items():
        if len(by_measure) > 1:
            (a, ra), (b, rb) = list(by_measure.items())[:2]
            raise StatsError(f"model {model!r} on probe {probe!r}: runs measured with different screen settings "
                             f"({a} in run {ra.info.run_id[:8]}; {b} in run {rb.info.run_id[:8]}), so they cannot "
                             "share a curve; keep one with source.filter or source.sweep, or screen again")
    for identity, group in points.items():
        layouts = {(r.data.params.get(N_LAYERS_PARAM), r.data.params.get(N_HEADS_PARAM)) for r in group} - {(None, None)}
        if len(layouts) > 1:
            raise StatsError(f"model {identity.model!r} revision {identity.revision!r}: runs disagree on the head "
                             f"layout (n_layers, n_heads) {sorted(layouts)}; they cannot be the same model")
    labels, seeds = {}, {}
    for model in dict.fromkeys(i.model for i in points):
        probes = sorted({i.probe for i in points if i.model == model})
        kinds = [probe_kind(p) for p in probes]
        for probe in probes:
            if len(probes) == 1:
                base = model
            else:
                base = f"{model} [{probe_kind(probe) if kinds.count(probe_kind(probe)) == 1 else probe}]"
            runs_of = list(dict.fromkeys(i.seed for i in points if i.model == model and i.probe == probe))
            n_seeds = len([s for s in runs_of if s is not None])
            for seed in runs_of:
                label = labels[(model, probe, seed)] = seed_label(base, seed, n_seeds)
                if seed is not None:
                    group = base if seed.group == model else base.replace(model, seed.group, 1)
                    seeds[label] = RunSeed(seed.seed, seed.kind, group)
    notes = []
    shared = [g for g in points.values() if len(g) > 1]
    if shared:
        notes.append(f"{len(shared)} (model, revision, probe) point(s) have several complete runs "
                     f"({sum(len(g) for g in shared)} runs): per metric and heads.csv column the newest run that has it "
                     "is used")
    for model in dict.fromkeys(i.model for i in points):
        probes = sorted({key[1] for key in labels if key[0] == model})
        if len(probes) > 1:
            names = [labels[key] for key in labels if key[0] == model]
            notes.append(f"model {model!r} was screened on {len(probes)} probes; their curves are kept apart: "
                         f"{', '.join(names)}")
    return points, labels, notes, seeds


def seed_label(model: str, seed: Optional[RunSeed], n_seeds: int) -> str:
    """The table name of one training run of ``model``: ``model`` itself when the model has one
    run (``n_seeds`` < 2 or no seed), else ``<model> [seed 3]`` (``[data-seed 1]``, ``[weight-seed 2]``)."""
    return model if seed is None or n_seeds < 2 else f"{model} [{seed.label}]"


def label_seeds(df: pd.DataFrame, where: str) -> tuple:
    """A table with a ``model`` and an optional ``seed`` column (and ``seed_kind``, default
    ``both``) relabelled per training run (:func:`seed_label`); returns ``(table, seeds)`` with
    ``seeds`` as in :attr:`TrackedResults.seeds` (group: the model). An empty seed cell is a
    run of no seed suite. Refuses a ``seed_kind`` outside the valid kinds in one line."""
    if "seed" not in df.columns:
        return df, {}
    df = df.copy()
    kinds = df["seed_kind"] if "seed_kind" in df.columns else pd.Series("both", index=df.index)
    kinds = kinds.where(kinds.notna() & (kinds.astype(str) != ""), "both").astype(str)
    bad = ~kinds.isin(SEED_KINDS)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise StatsError(f"{where}: column 'seed_kind' row {row}: {kinds.iloc[row]!r} is not a seed kind; valid: "
                         f"{', '.join(SEED_KINDS)}")
    runs = [None if pd.isna(v) or str(v) == "" else RunSeed(_seed_text(v), k, str(m))
            for v, k, m in zip(df["seed"], kinds, df["model"])]
    seeds, labels = {}, []
    per_model = {m: len({r for r, mm in zip(runs, df["model"]) if mm == m and r is not None}) for m in df["model"].unique()}
    for run, model in zip(runs, df["model"]):
        label = seed_label(model, run, per_model[model])
        labels.append(label)
        if run is not None:
            seeds[label] = run
    df["model"] = labels
    return df.drop(columns=[c for c in ("seed", "seed_kind") if c in df.columns]), seeds


def _seed_text(value) -> str:
    """A seed cell as text: ``3`` for 3 or 3.0, else the text itself."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(f)) if np.isfinite(f) and f == int(f) else str(value)


def combined(mappings) -> dict:
    """One mapping from several, newest first: each key's value from the first that has it."""
    out: dict = {}
    for mapping in mappings:
        for key, value in mapping.items():
            out.setdefault(key, value)
    return out


def combined_heads(frames) -> Optional[pd.DataFrame]:
    """One per-head table from the ``heads.csv`` of several runs of one point, newest
    first: each column from the newest table that has it, rows matched on (layer, head)."""
    if not frames:
        return None
    key = list(HEAD_KEY_COLUMNS)
    out = frames[0]
    for older in frames[1:]:
        extra = [c for c in older.columns if c not in out.columns]
        if extra:
            out = out.merge(older[key + extra], on=key, how="left")
    return out


def _read_heads(client, run, dst: str) -> Optional[pd.DataFrame]:
    """The run's ``heads.csv`` artifact: read in place from a local artifact store,
    else downloaded into ``dst``; None when the run has none."""
    uri = run.info.artifact_uri or ""
    if uri.startswith("file:") or uri.startswith("/"):
        local = Path(unquote(urlparse(uri).path)) / HEADS_ARTIFACT
        return pd.read_csv(local) if local.is_file() else None
    try:
        names = [a.path for a in client.list_artifacts(run.info.run_id)]
    except Exception:
        return None
    if HEADS_ARTIFACT not in names:
        return None
    local = client.download_artifacts(run.info.run_id, HEADS_ARTIFACT, dst)
    df = pd.read_csv(local)
    Path(local).unlink(missing_ok=True)
    return df
