"""One job: config -> registry -> model at revision -> probe -> screens -> tracking.

A job screens the revisions its ``revision`` config selects (under ``-m`` the sweeper
pins one revision per job). Every input is checked before any model is loaded or any
run is opened, so bad input leaves nothing behind.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from emergence import EmergenceError
from emergence import registry
from emergence.config import check_config
from emergence.loading import choose_device, choose_dtype, load, model_bytes, plan_batch_size
from emergence import sweep_prefetch
from emergence.prefetch import FetchFailed, Pipeline
from emergence.probes import CHECKS as CORPUS_CHECKS, CORPORA, ModelLimits, build_probe, check_corpus
from emergence.revisions import Revision
from emergence.screens import check_screen, recipe_for, screen
from emergence.screens.ablation import check_heads
from emergence.contract import (
    CONFIG_HASH_TAG,
    FAMILY_PARAM,
    HEAD_DIM_PARAM,
    HOST_TAG,
    INDUCTION_LOSS_METRIC,
    MODEL_PARAM,
    MODEL_TAG,
    PARENT_TAG,
    PID_TAG,
    N_HEADS_PARAM,
    N_LAYERS_PARAM,
    PRETRAINING_CORPUS_PARAM,
    PROBE_PARAM,
    REGISTRY_INDEX_PARAM,
    REGISTRY_SIZE_PARAM,
    REVISION_PARAM,
    REVISION_TAG,
    SCREEN_TAG,
    STEP_PARAM,
    SWEEP_TAG,
    TOKENS_METRIC,
    TOKENS_PARAM,
    TOKENS_TAG,
    count_metric,
    fraction_metric,
    parse_metric,
)
from emergence.contract.store import sqlite_file
from emergence.contract.storecheck import store_problem
from emergence.tracking import Tracker, config_hash, flatten
from emergence.contract.store import StoreError

SUMMARY_METRICS = (fraction_metric("bos"), count_metric("induction"), INDUCTION_LOSS_METRIC)


@dataclass
class RevisionResult:
    model: str
    revision: Revision
    run_id: str
    metrics: Dict[str, float]
    skipped: bool
    #: The classes the job reports (``screen.classes``); the run logged every class.
    classes: Tuple[str, ...] = ("induction",)
    #: Why a revision has no metrics here (``screened by another sweep (run ..., host ..., pid ...)``).
    note: str = ""
    #: The model with its seed for a run of a seed suite (:func:`model_label`); the tables group by it.
    label: str = ""


def validate(cfg: DictConfig) -> List[Revision]:
    """Check every user-given value; returns the revisions to screen."""
    check_config(cfg)  # every field against its schema's constraints (emergence/config.py)
    check_screen(list(cfg.screen.classes), {k: float(v) for k, v in cfg.screen.thresholds.items()})
    if cfg.corpus.kind not in CORPORA:
        raise EmergenceError(f"unknown corpus kind {cfg.corpus.kind!r}; valid: {', '.join(CORPORA)}")
    if cfg.corpus.n_sequences < 1 or cfg.corpus.batch_size < 1:
        raise EmergenceError(f"corpus.n_sequences={cfg.corpus.n_sequences} and corpus.batch_size="
                             f"{cfg.corpus.batch_size} must be >= 1")
    check_corpus(cfg.corpus)
    memory_gb = cfg.screen.get("memory_gb")
    if memory_gb is not None and not float(memory_gb) > 0:
        raise EmergenceError(f"screen.memory_gb={memory_gb} must be > 0 (GiB), or null for the free GPU memory "
                             "(4 GiB on the CPU)")
    recipe_for(cfg.screen).check(cfg.screen, cfg.corpus)
    choose_dtype(cfg.model.family, cfg.model.dtype, choose_device(cfg.device))
    registry.model_source(cfg.model)  # the family, and the config against its source (emergence/sources/)
    revisions = registry.selected_revisions(cfg.model, cfg.revision)
    limits = declared_limits(cfg.model, revisions)
    if cfg.corpus.kind in CORPUS_CHECKS:
        note = check_corpus(cfg.corpus, limits)
        if note:
            import sys

            print(f"note: {note}", file=sys.stderr)
    if cfg.screen.ablation is not None:
        check_heads(cfg.screen.ablation, limits)
    check_store(cfg.tracking)
    return revisions


def check_store(tracking) -> None:
    """The store of ``tracking`` can be used (emergence/contract/storecheck.py: a known scheme; a local
    store writable, a server answering within ``tracking.connect_timeout_s``); checked once per
    process and store, before any work, dry runs included."""
    _check_store(str(tracking.uri), tracking.get("artifacts"), float(tracking.get("connect_timeout_s", 10.0)))


@functools.lru_cache(maxsize=None)
def _check_store(uri: str, artifacts: Optional[str], timeout_s: float) -> None:
    problem = store_problem(uri, artifacts, timeout_s)
    if problem:
        raise EmergenceError(problem)


def declared_limits(model_cfg, revisions: List[Revision]) -> Optional[ModelLimits]:
    """A model's vocabulary, context, layers and heads as declared before any weights are
    loaded, by its source (the toy recipe, else the ``config.json`` of the first revision in
    a local folder or the HF cache, without the network); None when unknown (the probe is
    then checked after loading)."""
    return registry.model_source(model_cfg).declared_limits(model_cfg, revisions)


def sweep_id(cfg: DictConfig) -> str:
    if cfg.tracking.sweep:
        return str(cfg.tracking.sweep)
    try:
        from hydra.core.hydra_config import HydraConfig

        hc = HydraConfig.get()
        if hc.mode is not None:  # (compose() outside an app leaves a HydraConfig without a mode)
            return hc.sweep.dir if hc.mode.name == "MULTIRUN" else hc.run.dir
    except ValueError:  # outside a Hydra app
        pass
    return f"adhoc-{time.strftime('%Y%m%d-%H%M%S')}"


def run_params(cfg: DictConfig, revision: Revision, adapter, known: List[Revision]) -> Dict[str, str]:
    """Every config value (flattened) and the run contract's identity params; ``known`` is the
    model's registry, whose index of the revision says which checkpoints are adjacent."""
    params = flatten(OmegaConf.to_container(cfg, resolve=True))
    params.update({
        MODEL_PARAM: cfg.model.name, REVISION_PARAM: revision.name, STEP_PARAM: str(revision.step),
        TOKENS_PARAM: str(revision.tokens), FAMILY_PARAM: cfg.model.family,
        PRETRAINING_CORPUS_PARAM: cfg.model.pretraining_corpus,
        N_LAYERS_PARAM: str(adapter.n_layers), N_HEADS_PARAM: str(adapter.n_heads),
        HEAD_DIM_PARAM: str(adapter.head_dim),
        REGISTRY_INDEX_PARAM: str(known.index(revision)) if revision in known else "",
        REGISTRY_SIZE_PARAM: str(len(known)),
    })
    seed = registry.model_source(cfg.model).run_seed(cfg.model)  # a run of a seed suite: seed, kind, group
    if seed is not None:
        params.update(seed.params())
    return params


def model_label(model_cfg) -> str:
    """The model's name, with its seed for a run of a seed suite (``toy_neox [seed 3]``)."""
    seed = registry.model_source(model_cfg).run_seed(model_cfg)
    return str(model_cfg.name) if seed is None else f"{model_cfg.name} [{seed.label}]"


class JobFailed(Exception):
    """Some revisions of a job failed; their runs are FAILED in MLflow with the error as the
    tag ``emergence.error``, and the job's other revisions were screened."""

    def __init__(self, message: str, results: Optional[List[RevisionResult]] = None):
        super().__init__(message)
        self.results = results or []

    def __reduce__(self):  # picklable (joblib, submitit return it to the launcher)
        return (JobFailed, (self.args[0],))


def _run_note(cfg: DictConfig, revision: Revision) -> str:
    return (f"{cfg.model.name} at {revision.name} ({revision.tokens:,} tokens, step {revision.step}), "
            f"screen {cfg.screen.name}, corpus {cfg.corpus.kind}. Metrics are logged at step = tokens.")


def revision_pipeline(cfg: DictConfig, revisions: List[Revision], known: List[Revision], tracker: Tracker,
                      progress: bool = True) -> Pipeline:
    """The job's download pipeline (emergence/prefetch.py): revision i+1 is fetched (and, with
    ``cache.load_ahead``, loaded onto the device: emergence/sweep_prefetch.py ``loads_ahead``)
    in the background while revision i is screened; under ``-m`` a pinned job takes its
    revision from the sweep's own pipeline when one runs (``sweep_prefetch.take``). A hub
    revision is deleted from the HF cache once the job has moved past it (screened or failed;
    not one claimed by another job) with ``cache.evict=true``, or with ``null`` (auto) when the
    disk would not hold the revisions still to come (``emergence.prefetch.disk_short``), so at
    most two are on disk. Revisions with a finished run (and no ``force``) are not fetched.
    What fetching and eviction mean is the model source's (emergence/sources/); its ``prepare``
    runs here, before the pipeline starts, not in its thread (the toy suite is trained there)."""
    from emergence import sweep_prefetch
    from emergence.prefetch import disk_short

    source = registry.model_source(cfg.model)
    done = set() if cfg.force else {r.name for r in revisions
                                    if tracker.finished_run(config_hash(cfg, r)) is not None}
    source.prepare(cfg.model, [r for r in revisions if r.name not in done], cfg.cache.toy_dir, progress)
    handed: Dict[str, object] = {}  # models the sweep's pipeline loaded ahead for this job

    def fetch(revision: Revision):
        if revision.name in done:
            return None
        got = sweep_prefetch.take(cfg, revision)
        if got is not None and got.error is not None:
            raise got.error
        if got is None or (got.loaded is None and not sweep_prefetch.still_there(got.value)):
            # (no sweep pipeline, or an earlier job of the same revision evicted it since)
            return source.fetch(cfg.model, revision, known, cfg.cache.toy_dir, progress)
        if got.loaded is not None:
            handed[revision.name] = got.loaded
        return got.value

    def load_ahead(revision: Revision, folder):
        if revision.name in handed:
            return handed.pop(revision.name)
        if len(revisions) < 2 or not sweep_prefetch.loads_ahead(cfg):
            return None
        try:
            return load(cfg.model, revision, known=known, device=cfg.device, toy_dir=cfg.cache.toy_dir,
                        progress=False, folder=folder, precision=cfg.matmul_precision)
        except Exception:  # noqa: BLE001  (loaded again in the foreground, where its error is classified)
            return None

    def drop(revision: Revision, folder) -> None:
        if revision.name not in claimed:  # never a revision another job may be screening from this cache
            return
        still = len(revisions) - revisions.index(revision) - 1 + sweep_prefetch.remaining()
        if cfg.cache.evict or (cfg.cache.evict is None and disk_short(folder, still)):
            source.evict(cfg.model, revision)

    claimed: set = set()
    pipeline = Pipeline(revisions, fetch, drop if (source.evictable and cfg.cache.evict is not False) else None,
                        load=load_ahead)
    pipeline.claimed = claimed  # run_job adds the revisions it claims
    return pipeline


def run_job(cfg: DictConfig, progress: bool = True) -> List[RevisionResult]:
    """Screen the selected revisions (:func:`screen_revisions`), or refine a screened model's
    transitions round by round (``revision=refine`` without a pinned revision: :func:`refine_job`);
    with ``live=adaptive``, train the toy with live screening first (emergence/live/job.py)."""
    if cfg.get("live") is not None and cfg.live.mode != "off":
        from emergence.live import job as live_job

        return live_job.run(cfg, progress)
    revisions = validate(cfg)
    if cfg.revision.select == "refine" and cfg.revision.pin is None:
        return labelled(cfg, refine_job(cfg, progress))
    return labelled(cfg, screen_revisions(cfg, revisions, progress))


def labelled(cfg: DictConfig, results: List[RevisionResult]) -> List[RevisionResult]:
    """``results`` with their :attr:`RevisionResult.label` set (the model with its seed)."""
    label = model_label(cfg.model)
    for r in results:
        r.label = label
    return results


def screen_revisions(cfg: DictConfig, revisions: List[Revision], progress: bool = True,
                     known: Optional[List[Revision]] = None) -> List[RevisionResult]:
    """Screen ``revisions`` (checked by :func:`validate`), one claimed MLflow run each (emergence/tracking.py).

    A revision whose run is complete is skipped (unless ``force``); one claimed by a live job
    elsewhere is skipped and listed as screened by another sweep (or job). A revision that
    cannot be screened (its checkpoint missing, truncated or corrupt; its download failed;
    its screen raised) gets its run FAILED with the error as a tag and the others go on;
    :class:`JobFailed` at the end names the failed ones. Ctrl-C marks the run being screened
    KILLED; a failing store (:class:`emergence.tracking.StoreError`) or a config error found
    only after loading ends the job. Revisions come through the download pipeline
    (:func:`revision_pipeline`): one fetched ahead. The batch size comes from the memory budget
    (:func:`emergence.loading.plan_batch_size`)."""
    import sys

    tracker = Tracker(cfg.tracking)
    sweep = sweep_id(cfg)
    reported = tuple(cfg.screen.classes)  # what the table prints; every class is logged
    results: List[RevisionResult] = []
    failures: List[str] = []
    known = known or registry.model_revisions(cfg.model)  # once per job, not once per revision
    pipeline = revision_pipeline(cfg, revisions, known, tracker, progress)
    bar = tqdm(pipeline, total=len(revisions), desc=f"{cfg.model.name}", unit="rev",
               disable=not progress or len(revisions) < 2)
    for fetched in bar:
        revision = fetched.item
        bar.set_postfix_str(revision.name)
        digest = config_hash(cfg, revision)
        run_name = f"{cfg.model.name}@{revision.name}:{cfg.screen.name}"
        tags = {CONFIG_HASH_TAG: digest, SWEEP_TAG: sweep, MODEL_TAG: cfg.model.name,
                REVISION_TAG: revision.name, TOKENS_TAG: str(revision.tokens), SCREEN_TAG: cfg.screen.name}
        run_id, why = tracker.claim(digest, run_name, tags, force=bool(cfg.force))
        if run_id is None:
            results.append(_not_screened_here(cfg, tracker, revision, digest, why, reported))
            continue
        pipeline.claimed.add(revision.name)
        try:
            with tracker.heartbeat(run_id):
                metrics = _screen_revision(cfg, tracker, run_id, fetched, known, progress)
        except KeyboardInterrupt as exc:
            tracker.fail(run_id, exc, status="KILLED")
            raise
        except (EmergenceError, StoreError) as exc:  # every revision would fail alike: the job ends
            tracker.fail(run_id, exc)
            raise
        except Exception as exc:  # noqa: BLE001  (recorded; the job's other revisions go on)
            tracker.fail(run_id, exc)
            why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            failures.append(f"{revision.name}: {why}")
            print(f"{run_name} failed: {why}", file=sys.stderr)
            continue
        results.append(RevisionResult(cfg.model.name, revision, run_id, metrics, skipped=False, classes=reported))
        tracker.log_curves([(model_label(cfg.model), metrics, revision.tokens)])  # one curve a seed
    if failures:
        raise JobFailed(f"{cfg.model.name}: {len(failures)} of {len(revisions)} revision(s) failed: "
                        + "; ".join(failures), results)
    return results


class RevisionFailed(Exception):
    """One revision could not be loaded (its checkpoint is missing, truncated or corrupt): its
    run is FAILED with this message and the job goes on with the other revisions."""


def _not_screened_here(cfg: DictConfig, tracker: Tracker, revision: Revision, digest: str, why: str,
                       reported: Tuple[str, ...]) -> RevisionResult:
    """The result of a revision this job did not claim: done before (its run's metrics), or held
    by a live job elsewhere (no metrics; the table says who screens it)."""
    import sys

    done = tracker.finished_run(digest)
    if done is not None:
        tracker.log_curves([(model_label(cfg.model), done.data.metrics, revision.tokens)])
        return RevisionResult(cfg.model.name, revision, done.info.run_id, dict(done.data.metrics), skipped=True,
                              classes=reported)
    run_name = f"{cfg.model.name}@{revision.name}:{cfg.screen.name}"
    print(f"{run_name}: {why}; skipped", file=sys.stderr)
    holder = tracker.last_holder
    if holder is None:
        return RevisionResult(cfg.model.name, revision, "", {}, skipped=True, classes=reported, note=why)
    tags = holder.data.tags
    by = "sweep" if tags.get(PARENT_TAG) else "job"
    return RevisionResult(cfg.model.name, revision, holder.info.run_id, {}, skipped=True, classes=reported,
                          note=f"screened by another {by} (host {tags.get(HOST_TAG, '?')}, pid {tags.get(PID_TAG, '?')})")


def _screen_revision(cfg: DictConfig, tracker: Tracker, run_id: str, fetched, known: List[Revision],
                     progress: bool) -> Dict[str, float]:
    """Load one fetched revision, screen it, write its claimed run; returns its metrics.

    A revision whose fetch failed or whose checkpoint cannot be loaded raises
    :class:`FetchFailed` / :class:`RevisionFailed` (the job goes on); an
    :class:`EmergenceError` raised after loading (a probe the model cannot take) ends the job."""
    revision = fetched.item
    if fetched.error is not None:  # this revision only: recorded, the others go on
        raise FetchFailed(str(fetched.error))
    tic = time.perf_counter()
    loaded, fetched.loaded = fetched.loaded, None  # loaded ahead (emergence/prefetch.py), else here
    if loaded is None:
        try:
            loaded = load(cfg.model, revision, known=known, device=cfg.device, toy_dir=cfg.cache.toy_dir,
                          progress=progress, folder=fetched.value, precision=cfg.matmul_precision)
        except EmergenceError as exc:  # a missing, truncated or corrupt checkpoint: this revision only
            raise RevisionFailed(str(exc)) from None
        load_seconds, ahead = time.perf_counter() - tic, False
    else:
        load_seconds, ahead = fetched.load_s, True
    tic = time.perf_counter()
    probe = build_probe(cfg.corpus, loaded.model.config, loaded.tokenizer)
    reserve = model_bytes(loaded.model) if sweep_prefetch.loads_ahead(cfg) else 0  # the next one may be loading
    plan = plan_batch_size(loaded.model.config, probe.seq_len, loaded.dtype, loaded.device,
                           cfg.screen.get("memory_gb"), cfg.corpus.batch_size,
                           rows=recipe_for(cfg.screen).attention_rows(cfg.screen, probe.seq_len), reserve_bytes=reserve)
    probe.batch_size = plan.batch_size
    result = screen(loaded.model, loaded.adapter, probe, cfg.screen, progress=progress,
                    description=f"{cfg.model.name}@{revision.name}", precision=loaded.matmul_precision)
    screen_seconds = time.perf_counter() - tic
    metrics = dict(result.metrics)
    metrics.update({TOKENS_METRIC: float(revision.tokens), "train_step": float(revision.step),
                    "screen_seconds": screen_seconds, "load_seconds": load_seconds,
                    "fetch_wait_seconds": fetched.waited_s})
    params = run_params(cfg, revision, loaded.adapter, known)
    params.update(result.params)
    params.update({PROBE_PARAM: probe.description, "dtype": str(loaded.dtype).replace("torch.", ""),
                   "device": str(loaded.device), "source": loaded.source,
                   "batch_size": str(plan.batch_size), "memory_budget": plan.describe(),
                   "matmul_precision": loaded.matmul_precision, "loaded_ahead": str(ahead).lower()})
    tracker.complete(run_id, params=params, metrics=metrics, heads=result.heads,
                     config_yaml=OmegaConf.to_yaml(cfg, resolve=True), step=revision.tokens,
                     note=_run_note(cfg, revision))
    return metrics  # (the model is freed here, before the next revision is loaded and this one evicted)


# --- adaptive refinement (revision=refine) ---------------------------------------------------------

def screened_runs(cfg: DictConfig, known: List[Revision], tracker: Optional[Tracker] = None) -> Dict[Revision, object]:
    """The complete runs of this job's identity (model, corpus, screen) per registry revision.

    Matched by the identity hash, so runs of another corpus or screen never count. With no
    ``tracker`` the store is only read when it exists (a dry run creates nothing)."""
    if tracker is None:
        db = sqlite_file(cfg.tracking.uri)
        if db is not None and not db.exists():
            return {}
        tracker = Tracker(cfg.tracking)
    by_hash = {config_hash(cfg, r): r for r in known}
    out: Dict[Revision, object] = {}
    for run in sorted(tracker.complete_runs(cfg.model.name), key=lambda run: run.info.start_time):
        r = by_hash.get(run.data.tags.get(CONFIG_HASH_TAG))
        if r is not None:
            out[r] = run  # the newest run of a revision wins
    return out


def _counts(runs: Dict[Revision, object], classes) -> Dict[str, Dict[Revision, float]]:
    return {c: {r: run.data.metrics[count_metric(c)] for r, run in runs.items()
                if count_metric(c) in run.data.metrics} for c in classes}


def refine_plan(cfg: DictConfig, known: List[Revision], runs: Dict[Revision, object]):
    """The next round (:func:`emergence.refine.plan_round`) from the screened ``runs``."""
    from emergence.refine import plan_round

    ref = cfg.revision.refine
    return plan_round(_counts(runs, ref.classes), known, list(ref.classes), int(ref.per_round))


def refine_job(cfg: DictConfig, progress: bool = True) -> List[RevisionResult]:
    """``revision=refine``: screen the start selection if fewer than 2 revisions of this
    identity are screened, then up to ``revision.refine.rounds`` rounds of
    :func:`refine_plan`, each printed (class, bracket, revisions added), until every
    bracket lies between adjacent registry revisions. Ends with the before/after table.
    Returns every screened revision of this identity (earlier ones as ``skipped``)."""
    known = registry.model_revisions(cfg.model)
    tracker = Tracker(cfg.tracking)
    ref = cfg.revision.refine
    runs = screened_runs(cfg, known, tracker)
    if len(runs) < 2:
        start = validate(cfg)
        print(f"refine: {len(runs)} revision(s) of {cfg.model.name} screened with this corpus and screen; "
              f"screening the start selection first ({len(start)} revisions, revision.k={cfg.revision.k})")
        screen_revisions(cfg, start, progress, known)
        runs = screened_runs(cfg, known, tracker)
    before = refine_plan(cfg, known, runs)
    plan, added, rounds = before, [], 0
    while not plan.done and rounds < int(ref.rounds):
        rounds += 1
        print(f"refine round {rounds} of at most {ref.rounds} ({cfg.model.name}):\n{plan.describe()}")
        screen_revisions(cfg, plan.revisions, progress, known)
        added += plan.revisions
        runs = screened_runs(cfg, known, tracker)
        plan = refine_plan(cfg, known, runs)
    print(format_refinement(cfg.model.name, before, plan, added, rounds))
    return [RevisionResult(cfg.model.name, r, run.info.run_id, dict(run.data.metrics), skipped=r not in added,
                           classes=tuple(cfg.screen.classes)) for r, run in sorted(runs.items())]


def format_refinement(model: str, before, after, added: List[Revision], rounds: int) -> str:
    """The before/after table of a refinement: each class's bracket and whether it is resolved."""
    def cell(b) -> str:
        return "no transition" if b is None else f"{b.lo.name} -> {b.hi.name} ({b.inside} inside)"

    lines = [f"refinement of {model}: {len(added)} revision(s) added in {rounds} round(s)",
             "| class | bracket before | bracket after | resolved to adjacent checkpoints |", "|---|---|---|---|"]
    for cls, b in after.brackets.items():
        resolved = "n/a" if b is None else ("yes" if b.resolved else "no")
        lines.append(f"| {cls} | {cell(before.brackets.get(cls))} | {cell(b)} | {resolved} |")
    return "\n".join(lines)


def format_table(results: List[RevisionResult]) -> str:
    """Per model and revision: tokens, BOS fraction, the count of flagged heads of each
    reported class (``screen.classes``; every class is logged in the run), induction loss."""
    lines = []
    for model in dict.fromkeys(r.label or r.model for r in results):
        rows = [r for r in results if (r.label or r.model) == model]
        classes = list(dict.fromkeys(c for r in rows for c in r.classes))
        widths = [max(len(c) + 2, 7) for c in classes]
        lines.append(f"{model}")
        lines.append(f"  {'revision':<24}{'tokens':>14}{'BOS frac':>10}"
                     + "".join(f"{c:>{w}}" for c, w in zip(classes, widths)) + f"{'ind. loss':>11}  run")
        for r in sorted(rows, key=lambda r: r.revision):
            m = r.metrics
            frac = m.get(fraction_metric("bos"))
            counts = [m.get(count_metric(c)) for c in classes]
            loss = m.get(INDUCTION_LOSS_METRIC)
            lines.append(
                f"  {r.revision.name:<24}{r.revision.tokens:>14,}"
                f"{'' if frac is None else f'{frac:.1%}':>10}"
                + "".join(f"{'' if k is None else f'{k:.0f}':>{w}}" for k, w in zip(counts, widths))
                + f"{'' if loss is None else f'{loss:.3f}':>11}"
                f"  {r.run_id[:8]}{f' ({r.note})' if r.note else ' (done before)' if r.skipped else ''}")
    return "\n".join(lines)


def _tokens(t: int) -> str:
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if t >= size:
            return f"{t / size:.3g}{unit}"
    return str(t)


def formation_rows(results: List[RevisionResult]) -> List[Dict[str, str]]:
    """Per model: tokens at the first revision with an induction head and with a BOS head,
    the layers that hold BOS heads (at any screened revision), and the induction loss
    at the first and last screened revisions. ``none`` where no head ever crosses."""
    rows = []
    results = [r for r in results if r.metrics]  # (a revision another sweep screens has none here)
    for model in dict.fromkeys(r.label or r.model for r in results):
        ordered = sorted((r for r in results if (r.label or r.model) == model), key=lambda r: r.revision)

        def first(metric: str) -> str:
            hit = next((r for r in ordered if r.metrics.get(metric, 0) >= 1), None)
            return "none" if hit is None else f"{_tokens(hit.revision.tokens)} ({hit.revision.name})"

        parsed = [(parse_metric(k), v) for r in ordered for k, v in r.metrics.items()]
        layers = sorted({p.layer for p, v in parsed if p is not None and p.kind == "layer_count"
                         and p.head_class == "bos" and v > 0})
        loss = [r.metrics.get(INDUCTION_LOSS_METRIC, float("nan")) for r in ordered]
        rows.append({"model": model, "induction heads from": first(count_metric("induction")),
                     "BOS heads from": first(count_metric("bos")),
                     "layers with BOS heads": ", ".join(map(str, layers)) if layers else "none (no sink)",
                     "induction loss first -> last": f"{loss[0]:.2f} -> {loss[-1]:.2f}"})
    return rows


def format_markdown(rows: List[Dict[str, str]]) -> str:
    if not rows:
        return ""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(row[k] for k in keys) + " |" for row in rows]
    return "\n".join(lines)


def stats_report(cfg: DictConfig, models: List[str]) -> str:
    """The statistics of this job's models (``stats.api.analyse_store``, in this process): the
    report lands beside the job's outputs (``${emergence_home:}/outputs/stats/...``) and is logged
    into the job's store. Returns stats' one-line summary, or why it failed and how to rerun it."""
    from stats.api import analyse_store  # the statistics stack (scipy, statsmodels, matplotlib) only when asked for
    from stats.errors import StatsError

    try:
        return analyse_store(cfg.tracking.uri, cfg.tracking.experiment, models, cfg.tracking.artifacts)
    except Exception as exc:  # noqa: BLE001  (the screens are logged; a failing report does not fail the job)
        why = str(exc) if isinstance(exc, StatsError) else f"{type(exc).__name__}: {exc}"
        return (f"stats report failed: {why}\n  rerun it with: python -m stats source.tracking_uri={cfg.tracking.uri} "
                f"source.experiment={cfg.tracking.experiment} source.models=[{','.join(models)}]")


def ui_command(uri: str) -> str:
    return f"mlflow ui --backend-store-uri {uri}"


# --- dry run: the planned jobs, offline ---------------------------------------------------------

@dataclass
class PlannedJob:
    model: str
    revision: Revision
    #: What a screen of this revision downloads, as far as the local HF cache knows.
    download: str


def download_sizes(model_cfg, revisions: List[Revision]) -> Dict[str, str]:
    """Per revision name, what a screen of it would download, as the model's source knows
    it from the disk alone (never the hub): ``cached, <size>`` for a hub revision in the
    local HF cache, ``local, <size>`` for a checkpoint folder, ``toy (trained here)``, else
    ``unknown``."""
    return registry.model_source(model_cfg).download_sizes(model_cfg, revisions)


def plan_jobs(cfg: DictConfig) -> List[PlannedJob]:
    """The jobs ``cfg`` would run (after the same checks as a real run), without loading a
    model, opening MLflow or reaching the hub: revisions come from the stored snapshots."""
    if cfg.get("live") is not None and cfg.live.mode != "off":
        from emergence.live import job as live_job

        return live_job.plan(cfg)
    revisions = validate(cfg)
    if cfg.revision.select == "refine" and cfg.revision.pin is None:
        revisions = refine_first_round(cfg, revisions)
    sizes = download_sizes(cfg.model, revisions)
    return [PlannedJob(model_label(cfg.model), r, sizes[r.name]) for r in revisions]


def refine_first_round(cfg: DictConfig, start: List[Revision]) -> List[Revision]:
    """What ``revision=refine`` screens first: the start selection when fewer than 2 revisions
    of this identity are screened, else the first round's revisions (its plan printed)."""
    known = registry.model_revisions(cfg.model)
    runs = screened_runs(cfg, known)
    if len(runs) < 2:
        print(f"refine: {len(runs)} revision(s) screened; the first round screens the start selection")
        return start
    plan = refine_plan(cfg, known, runs)
    print(f"refine round 1 ({cfg.model.name}, {len(runs)} revisions screened):\n{plan.describe()}")
    return plan.revisions


def format_plan(jobs: List[PlannedJob], screen: str = "") -> str:
    width = max([20] + [len(job.model) + 2 for job in jobs])
    lines = [f"{'#':>3}  {'model':<{width}}{'revision':<26}{'step':>9}{'tokens':>18}  download"]
    for i, job in enumerate(jobs):
        r = job.revision
        lines.append(f"{i:>3}  {job.model:<{width}}{r.name:<26}{r.step:>9,}{r.tokens:>18,}  {job.download}")
    lines.append(f"dry run: {len(jobs)} job(s){f', screen {screen}' if screen else ''}; "
                 "no model loaded, no run logged")
    return "\n".join(lines)
