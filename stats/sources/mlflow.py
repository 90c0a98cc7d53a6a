"""Source kind ``mlflow``: the screen runs of an MLflow experiment (the store emergence writes).

The names of what a run logs (metrics, params, tags, ``heads.csv`` columns) and a run's
identity come from the run contract, :mod:`emergence.common.contract`; the head classes from the
registry :mod:`emergence.common.head_classes` (neither imports model code). Only runs tagged
``emergence.status = complete`` are read (configurable); how runs become points of curves, one set
per probe and per seed (a run without ``seed`` params is seed None): :func:`read_mlflow`.
"""

from __future__ import annotations

import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Iterable, Optional
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd

from emergence.common.contract import (CONTINUOUS_METRICS, COUNT, HEAD_KEY_COLUMNS, HEADS_ARTIFACT, LAYER_COUNT,
    MEAN_SELECTIVITY, MODEL_PARAM, N_HEADS_PARAM, N_HEADS_TOTAL_METRIC, N_LAYERS_PARAM, PRETRAINING_CORPUS_PARAM,
    KNOWN_INDEX_PARAM, STATUS_COMPLETE, STATUS_TAG, SWEEP_TAG, TOKENS_PARAM, RunIdentity, RunSeed, parse_metric,
    probe_kind)
from emergence.common import head_classes
from emergence.common.store import sqlite_file
from stats.errors import StatsError
from stats.heads import normalise_heads, selectivity_columns, with_units
from stats.sources import Source
from stats.tracked import (CONTINUOUS_COLUMNS, CURVE_COLUMNS, LAYER_COLUMNS, TrackedResults, dedupe_tokens,
                           seed_label)


def _client(tracking_uri: str):
    from mlflow.tracking import MlflowClient  # mlflow (heavy) only when a store is read

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


def read_mlflow(tracking_uri: str, experiment: str = "emergence", filter_string: Optional[str] = None,
                sweep: Optional[str] = None, models: Optional[Iterable[str]] = None,
                status: Optional[str] = STATUS_COMPLETE, read_heads: bool = True) -> TrackedResults:
    """Read the screen runs of an MLflow experiment into tidy tables.

    ``filter_string``: an MLflow search filter; ``sweep``: keep the runs tagged ``emergence.sweep`` with
    that id (``latest``: the newest run's); ``models``: keep those registry names; ``status``: keep the
    runs whose ``emergence.status`` tag equals it (None: all); ``read_heads``: read each run's
    ``heads.csv`` artifact for the per-head analyses.

    Runs are points of curves by their identity (:class:`emergence.common.contract.RunIdentity`):
    model, revision, probe and seed. Several runs of one point (a ``screen=bos`` run after a
    ``screen=all`` one, a forced rerun) are combined: per metric and per ``heads.csv`` column, the
    newest run that has it (so an old run that logged only ``count.bos`` loses nothing), with a note.
    A model gets one set of curves per probe and per training run of a seed suite (the runs' ``seed``
    params, :func:`emergence.common.contract.run_seed`), named by :func:`group_runs`. Runs of one model
    and probe measured with different screen settings (:func:`emergence.common.contract.measure_key`:
    the recipe, the local window, ...) are refused in one line.
    """
    client = _client(tracking_uri)
    runs, what, sweep = select_runs(client, tracking_uri, experiment, filter_string, sweep, models, status)
    points, labels, notes, seeds = group_runs(runs)
    rows = {"curves": [], "layers": [], "continuous": [], "heads": []}
    known_index: dict = {}
    with tempfile.TemporaryDirectory() if read_heads else nullcontext() as tmp:
        for identity, group in points.items():
            model = labels[(identity.model, identity.probe, identity.seed)]
            tokens = _point_rows(model, identity.revision, group, rows, known_index)
            if read_heads:
                heads = combined_heads([f for f in (_read_heads(client, r, tmp) for r in group) if f is not None])
                if heads is not None:  # the point's model, revision and tokens in front
                    for column, value in (("tokens", tokens), ("revision", identity.revision), ("model", model)):
                        heads.insert(0, column, value)
                    rows["heads"].append(heads)
    if not rows["curves"]:
        raise StatsError(f"runs in {what} have no count.<class> metrics; classes expected: {list(head_classes.names())}")
    curves = dedupe_tokens(pd.DataFrame(rows["curves"], columns=CURVE_COLUMNS))
    heads, head_notes = _run_heads(rows["heads"], read_heads)
    source = {"kind": "mlflow", "tracking_uri": tracking_uri, "experiment": experiment, "filter": filter_string,
              "sweep": sweep, "n_runs": sum(len(g) for g in points.values()), "n_points": len(points),
              "probes": {label: probe for (_, probe, _), label in labels.items()}}
    return TrackedResults(curves=curves, layers=pd.DataFrame(rows["layers"], columns=LAYER_COLUMNS), heads=heads,
                          continuous=pd.DataFrame(rows["continuous"], columns=CONTINUOUS_COLUMNS), source=source,
                          notes=notes + head_notes, known_index=known_index, seeds=seeds)


def select_runs(client, tracking_uri: str, experiment: str, filter_string: Optional[str], sweep: Optional[str],
                models: Optional[Iterable[str]], status: Optional[str]) -> tuple:
    """The screen runs :func:`read_mlflow` reads: ``(runs, what, sweep)``, ``what`` naming the search
    in messages and ``sweep`` the sweep id kept (``latest`` resolved). Every empty selection is one line."""
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
    return runs, what, sweep


def _point_rows(model: str, revision: str, group: list, rows: dict, known_index: dict) -> float:
    """Add one point's (the runs of one identity, newest first) count, per-layer and continuous rows
    to ``rows`` and its index among the known revisions to ``known_index``; return its token count."""
    p = combined(r.data.params for r in group)
    m = combined(r.data.metrics for r in group)
    run_id = group[0].info.run_id
    try:
        tokens = float(p[TOKENS_PARAM])
    except ValueError:
        raise StatsError(f"run {run_id}: param tokens={p[TOKENS_PARAM]!r} is not a number") from None
    if not (np.isfinite(tokens) and tokens >= 0):
        raise StatsError(f"run {run_id}: param tokens={p[TOKENS_PARAM]!r} is not a token count (a finite number >= 0)")
    corpus = p.get(PRETRAINING_CORPUS_PARAM, "unknown")
    if str(p.get(KNOWN_INDEX_PARAM, "")).isdigit():
        known_index[(model, revision)] = int(p[KNOWN_INDEX_PARAM])
    n_total = m.get(N_HEADS_TOTAL_METRIC)
    if n_total is None and N_LAYERS_PARAM in p and N_HEADS_PARAM in p:
        n_total = int(p[N_LAYERS_PARAM]) * int(p[N_HEADS_PARAM])
    n_heads = int(p[N_HEADS_PARAM]) if N_HEADS_PARAM in p else None
    for key, val in m.items():
        parsed = parse_metric(key)
        if parsed is not None and parsed.kind == COUNT:
            if n_total is None:
                raise StatsError(f"run {run_id}: no n_heads_total metric nor n_layers/n_heads params")
            rows["curves"].append((model, corpus, parsed.head_class, revision, tokens, val, n_total))
        elif parsed is not None and parsed.kind == LAYER_COUNT and n_heads is not None:
            rows["layers"].append((model, parsed.head_class, revision, tokens, parsed.layer, val, n_heads))
        # the whole-model continuous metrics (Schaeffer et al. 2023: report these too) and each class's mean selectivity
        if key in CONTINUOUS_METRICS or (parsed is not None and parsed.kind == MEAN_SELECTIVITY):
            rows["continuous"].append((model, revision, tokens, key, val))
    return tokens


def _run_heads(frames: list, read_heads: bool) -> tuple:
    """``(heads, notes)``: the points' per-head tables as one table, checked (:func:`normalise_heads`)
    when it holds selectivities; None without any."""
    heads = pd.concat(frames, ignore_index=True) if frames else None
    if heads is None:
        return None, (["no heads.csv artifacts: per-head analyses skipped"] if read_heads else [])
    if not selectivity_columns(heads.columns):
        return heads, ["heads.csv artifacts have no selectivity.<class> column: counts from the logged count.<class> "
                       "metrics"]
    return normalise_heads(heads, "heads.csv of the runs", allow_inf=True)


def group_runs(runs) -> tuple:
    """Group runs by identity; returns ``(points, labels, notes, seeds)``.

    ``points``: :class:`RunIdentity` -> its runs, newest first; ``labels``: (model, probe key,
    seed) -> the model name used in the tables (the bare name when the model has one probe and
    one seed; else ``<model> [<corpus kind>]`` (``[<probe key>]`` when two probes share a
    kind) and ``... [seed 3]``, see :func:`seed_label`); ``seeds``: that name -> its
    :class:`RunSeed`, whose group is the model's (probe) name unless the runs logged another
    ``seed_group``. Refuses (:class:`StatsError`) runs of one model and probe whose measure
    settings differ, and runs of one point whose head layout (n_layers, n_heads) differs.
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
    notes = []
    shared = [g for g in points.values() if len(g) > 1]
    if shared:
        notes.append(f"{len(shared)} (model, revision, probe) point(s) have several complete runs "
                     f"({sum(len(g) for g in shared)} runs): per metric and heads.csv column the newest run that has it "
                     "is used")
    labels, seeds = {}, {}
    for model in dict.fromkeys(i.model for i in points):
        probes = sorted({i.probe for i in points if i.model == model})
        kinds = [probe_kind(p) for p in probes]
        for probe in probes:
            kind = probe_kind(probe)
            base = model if len(probes) == 1 else f"{model} [{kind if kinds.count(kind) == 1 else probe}]"
            runs_of = list(dict.fromkeys(i.seed for i in points if i.model == model and i.probe == probe))
            n_seeds = len([s for s in runs_of if s is not None])
            for seed in runs_of:
                label = labels[(model, probe, seed)] = seed_label(base, seed, n_seeds)
                if seed is not None:
                    group = base if seed.group == model else base.replace(model, seed.group, 1)
                    seeds[label] = RunSeed(seed.seed, seed.kind, group)
        if len(probes) > 1:
            names = [label for key, label in labels.items() if key[0] == model]
            notes.append(f"model {model!r} was screened on {len(probes)} probes; their curves are kept apart: "
                         f"{', '.join(names)}")
    return points, labels, notes, seeds


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


def read(src) -> TrackedResults:
    """The source's reader: :func:`read_mlflow` with the ``source.*`` settings; a run's ``heads.csv``
    holds selectivities (x over a uniform head): their unit is ``ratio`` unless ``source.units`` says otherwise."""
    results = read_mlflow(src.tracking_uri, src.experiment, src.filter, src.sweep, src.models, src.status, src.read_heads)
    return with_units(results, getattr(src, "units", None), default="ratio")


def check(src) -> None:
    """The store must be named."""
    if not src.tracking_uri:
        raise StatsError("source.tracking_uri is empty; set it, e.g. source.tracking_uri=sqlite:////abs/path/mlflow.db")


def logged(src, results) -> dict:
    """What the analysis's run logs of the source: the experiment, filter and sweep read."""
    return {"source.experiment": src.experiment, "source.filter": src.filter, "source.sweep": src.sweep}


SOURCE = Source("mlflow", read, check=check, logged=logged, store_key="tracking_uri", order=0)
