"""The screening loop (:func:`screen_revisions`): each selected revision claimed, fetched, loaded,
screened and logged, one :class:`RevisionResult` each."""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from emergence import EmergenceError, sweep_prefetch
from emergence.common.contract import (RunSeed, CONFIG_HASH_TAG, FAMILY_PARAM, HEAD_DIM_PARAM, HOST_TAG,
    MODEL_PARAM, MODEL_TAG, N_HEADS_PARAM, N_LAYERS_PARAM, PARENT_TAG, PID_TAG, PRETRAINING_CORPUS_PARAM,
    PROBE_PARAM, KNOWN_INDEX_PARAM, KNOWN_SIZE_PARAM, REVISION_PARAM, REVISION_TAG, SCREEN_TAG, STEP_PARAM,
    SWEEP_TAG, TOKENS_METRIC, TOKENS_PARAM, TOKENS_TAG)
from emergence.common.checks import first_line
from emergence.common.store import StoreError
from emergence.common.progress import bars_disabled, stage_line
from emergence.loading import load, model_bytes, plan_batch_size
from emergence.preflight import JobPlan
from emergence.prefetch import FetchFailed, Pipeline, disk_short
from emergence.revisions import Revision
from emergence.screens import screen
from emergence.sources._hub import HubUnreachable
from emergence.tracking import ClaimLost, Tracker, config_hash, flatten


@dataclass
class RevisionResult:
    model: str
    revision: Revision
    run_id: str
    metrics: Dict[str, float]
    skipped: bool
    #: The classes the job reports (``screen.classes``); the run logged every class.
    classes: Tuple[str, ...] = ("induction",)
    #: Why a revision has no metrics here (``screened by another sweep (host ..., pid ...)``).
    note: str = ""
    #: The model with its seed for a seed suite (:func:`emergence.catalog.model_label`); tables group by it.
    label: str = ""


def sweep_id(cfg: DictConfig) -> str:
    """The ``emergence.sweep`` tag of a job's runs: ``tracking.sweep``, else the Hydra sweep (or run)
    folder, else an ad-hoc stamp outside a Hydra app."""
    if cfg.tracking.sweep:
        return str(cfg.tracking.sweep)
    try:
        hc = HydraConfig.get()
        if hc.mode is not None:  # (compose() outside an app leaves a HydraConfig without a mode)
            return hc.sweep.dir if hc.mode.name == "MULTIRUN" else hc.run.dir
    except ValueError:  # outside a Hydra app
        pass
    return f"adhoc-{time.strftime('%Y%m%d-%H%M%S')}"


def run_params(cfg: DictConfig, revision: Revision, adapter, known: List[Revision], seed: Optional[RunSeed]) -> Dict[str, str]:
    """Every config value (flattened) and the run contract's identity params (``seed``'s for a run of a
    seed suite); the revision's index in ``known`` (``registry_index``) says which checkpoints are adjacent."""
    params = flatten(OmegaConf.to_container(cfg, resolve=True))
    params.update({
        MODEL_PARAM: cfg.model.name, REVISION_PARAM: revision.name, STEP_PARAM: str(revision.step),
        TOKENS_PARAM: str(revision.tokens), FAMILY_PARAM: cfg.model.family,
        PRETRAINING_CORPUS_PARAM: cfg.model.pretraining_corpus,
        N_LAYERS_PARAM: str(adapter.n_layers), N_HEADS_PARAM: str(adapter.n_heads),
        HEAD_DIM_PARAM: str(adapter.head_dim),
        KNOWN_INDEX_PARAM: str(known.index(revision)) if revision in known else "",
        KNOWN_SIZE_PARAM: str(len(known)),
    })
    if seed is not None:  # a run of a seed suite: seed, kind, group
        params.update(seed.params())
    return params


class JobFailed(Exception):
    """Some revisions of a job failed (their runs FAILED, the error in ``emergence.error``); the job's
    other revisions were screened."""

    def __init__(self, message: str, results: Optional[List[RevisionResult]] = None):
        super().__init__(message)
        self.results = results or []

    def __reduce__(self):  # picklable (joblib, submitit return it to the launcher)
        return (JobFailed, (self.args[0],))


class RevisionFailed(Exception):
    """One revision could not be loaded (its checkpoint missing, truncated or corrupt): its run is
    FAILED with this message and the job goes on."""


def revision_pipeline(cfg: DictConfig, plan: JobPlan, tracker: Tracker, progress: bool = True) -> Pipeline:
    """The job's download pipeline (emergence/prefetch.py): revision i+1 fetched (with
    ``cache.load_ahead``, loaded) while revision i is screened, or taken from the sweep's pipeline
    (``sweep_prefetch.take``). A hub revision this job claimed is evicted once the job has moved
    past it with ``cache.evict=true``, or with ``null`` when the disk would not hold the rest
    (``emergence.prefetch.disk_short``). Revisions with a finished run (and no ``force``) are not
    fetched. The source's ``prepare`` runs here, before the pipeline's thread starts."""
    source, revisions, known = plan.source, plan.revisions, plan.known
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


def screen_revisions(cfg: DictConfig, plan: JobPlan, progress: bool = True,
                     parent_run: Optional[str] = None) -> List[RevisionResult]:
    """Screen the revisions of the job's ``plan``, one claimed MLflow run each (emergence/tracking.py),
    through :func:`revision_pipeline`; ``parent_run``: the parent run the job opened.

    A revision whose run is complete is skipped (unless ``force``); one claimed by a live job
    elsewhere is skipped and listed as screened by another sweep (or job). A revision that cannot
    be screened (checkpoint missing or corrupt, download failed, screen raised) gets its run FAILED
    and the others go on; :class:`JobFailed` at the end names them. Ctrl-C marks the run being
    screened KILLED; a failing store or a config error found only after loading ends the job."""
    tracker = Tracker(cfg.tracking, parent_run)
    sweep = sweep_id(cfg)
    results: List[RevisionResult] = []
    failures: List[str] = []
    revisions = plan.revisions
    pipeline = revision_pipeline(cfg, plan, tracker, progress)
    bar = tqdm(pipeline, total=len(revisions), desc=f"{cfg.model.name}", unit="rev",
               disable=True if len(revisions) < 2 else bars_disabled(progress))
    for i, fetched in enumerate(bar, 1):
        bar.set_postfix_str(fetched.item.name)
        started = time.perf_counter()
        result = _claim_and_screen(cfg, tracker, sweep, pipeline, fetched, plan, progress, failures)
        if result is not None:
            results.append(result)
        outcome = "failed" if result is None else "done before, skipped" if result.skipped else "screened"
        stage_line(f"{cfg.model.name}@{fetched.item.name}: {outcome} ({i}/{len(revisions)}, "
                   f"{time.perf_counter() - started:.0f} s)", progress)
    if failures:
        raise JobFailed(f"{cfg.model.name}: {len(failures)} of {len(revisions)} revision(s) failed: "
                        + "; ".join(failures), results)
    return results


def _claim_and_screen(cfg: DictConfig, tracker: Tracker, sweep: str, pipeline: Pipeline, fetched,
                      plan: JobPlan, progress: bool, failures: List[str]) -> Optional[RevisionResult]:
    """One revision: claimed, screened and logged, or not screened here (done before, held elsewhere);
    None when it failed (its line added to ``failures``)."""
    revision = fetched.item
    if isinstance(fetched.error, HubUnreachable):  # every later revision would fail alike: stop, claim nothing
        raise fetched.error
    reported = tuple(cfg.screen.classes)  # what the table prints; every class is logged
    digest = config_hash(cfg, revision)
    run_name = f"{cfg.model.name}@{revision.name}:{cfg.screen.name}"
    tags = {CONFIG_HASH_TAG: digest, SWEEP_TAG: sweep, MODEL_TAG: cfg.model.name,
            REVISION_TAG: revision.name, TOKENS_TAG: str(revision.tokens), SCREEN_TAG: cfg.screen.name}
    make_result = functools.partial(RevisionResult, cfg.model.name, revision, classes=reported)
    run_id, why = tracker.claim(digest, run_name, tags, force=bool(cfg.force))
    if run_id is None:
        return _not_screened_here(tracker, make_result, revision, digest, why, run_name, plan.label)
    pipeline.claimed.add(revision.name)
    try:
        with tracker.heartbeat(run_id):
            metrics = _screen_revision(cfg, tracker, run_id, fetched, plan, progress)
    except ClaimLost as lost:  # another job completed this identity first: its run stays, ours was deleted
        return _not_screened_here(tracker, make_result, revision, digest, str(lost), run_name, plan.label)
    except KeyboardInterrupt as exc:
        tracker.fail(run_id, exc, status="KILLED")
        raise
    except (EmergenceError, StoreError) as exc:  # every revision would fail alike: the job ends
        tracker.fail(run_id, exc)
        raise
    except Exception as exc:  # noqa: BLE001  (recorded; the job's other revisions go on)
        tracker.fail(run_id, exc)
        why = f"{type(exc).__name__}: {first_line(str(exc).strip())}"
        failures.append(f"{revision.name}: {why}")
        print(f"{run_name} failed: {why}", file=sys.stderr)
        return None
    tracker.log_curves([(plan.label, metrics, revision.tokens)])  # one curve a seed
    return make_result(run_id, metrics, skipped=False)


def _not_screened_here(tracker: Tracker, make_result: Callable[..., RevisionResult], revision: Revision,
                       digest: str, why: str, run_name: str, label: str) -> RevisionResult:
    """The result (built by ``make_result``: :class:`RevisionResult`, its model, revision and classes given)
    of a revision this job did not claim: done before (its run's metrics), or held by a live job elsewhere
    (no metrics; the table says who screens it)."""
    done = tracker.finished_run(digest)
    if done is not None:
        tracker.log_curves([(label, done.data.metrics, revision.tokens)])
        return make_result(done.info.run_id, dict(done.data.metrics), skipped=True)
    print(f"{run_name}: {why}; skipped", file=sys.stderr)
    holder = tracker.last_holder
    if holder is None:
        return make_result("", {}, skipped=True, note=why)
    tags = holder.data.tags
    by = "sweep" if tags.get(PARENT_TAG) else "job"
    return make_result(holder.info.run_id, {}, skipped=True,
                       note=f"screened by another {by} (host {tags.get(HOST_TAG, '?')}, pid {tags.get(PID_TAG, '?')})")


def _screen_revision(cfg: DictConfig, tracker: Tracker, run_id: str, fetched, plan: JobPlan,
                     progress: bool) -> Dict[str, float]:
    """Load one fetched revision, screen it, write its claimed run; returns its metrics. A failed fetch
    or load raises :class:`FetchFailed` / :class:`RevisionFailed` (the job goes on); an
    :class:`EmergenceError` raised after loading (a probe the model cannot take) ends the job."""
    revision = fetched.item
    if fetched.error is not None:  # this revision only: recorded, the others go on
        raise FetchFailed(str(fetched.error))
    tic = time.perf_counter()
    loaded, fetched.loaded = fetched.loaded, None  # loaded ahead (emergence/prefetch.py), else here
    if loaded is None:
        try:
            loaded = load(cfg.model, revision, known=plan.known, device=cfg.device, toy_dir=cfg.cache.toy_dir,
                          progress=progress, folder=fetched.value, precision=cfg.matmul_precision, source=plan.source)
        except HubUnreachable:  # offline: the job stops here (its run FAILED), not once per revision
            raise
        except EmergenceError as exc:  # a missing, truncated or corrupt checkpoint: this revision only
            raise RevisionFailed(str(exc)) from None
        load_seconds, ahead = time.perf_counter() - tic, False
    else:
        load_seconds, ahead = fetched.load_s, True
    tic = time.perf_counter()
    probe = plan.probe.build(cfg.corpus, loaded.model.config, loaded.tokenizer)
    reserve = model_bytes(loaded.model) if sweep_prefetch.loads_ahead(cfg) else 0  # the next one may be loading
    batch = plan_batch_size(loaded.model.config, probe.seq_len, loaded.dtype, loaded.device,
                           cfg.screen.memory_gb, cfg.corpus.batch_size,
                           rows=plan.recipe.attention_rows(cfg.screen, probe.seq_len), reserve_bytes=reserve)
    probe.batch_size = batch.batch_size
    result = screen(loaded.model, loaded.adapter, probe, cfg.screen, progress=progress,
                    description=f"{cfg.model.name}@{revision.name}", precision=loaded.matmul_precision)
    screen_seconds = time.perf_counter() - tic
    metrics = dict(result.metrics)
    metrics.update({TOKENS_METRIC: float(revision.tokens), "train_step": float(revision.step),
                    "screen_seconds": screen_seconds, "load_seconds": load_seconds,
                    "fetch_wait_seconds": fetched.waited_s})
    params = run_params(cfg, revision, loaded.adapter, plan.known, plan.seed)
    params.update(result.params)
    params.update({PROBE_PARAM: probe.description, "dtype": str(loaded.dtype).replace("torch.", ""),
                   "device": str(loaded.device), "source": loaded.source,
                   "batch_size": str(batch.batch_size), "memory_budget": batch.describe(),
                   "matmul_precision": loaded.matmul_precision, "loaded_ahead": str(ahead).lower()})
    tracker.complete(run_id, params=params, metrics=metrics, heads=result.heads,
                     config_yaml=OmegaConf.to_yaml(cfg, resolve=True), step=revision.tokens,
                     note=f"{cfg.model.name} at {revision.name} ({revision.tokens:,} tokens, step {revision.step}), "
                          f"screen {cfg.screen.name}, corpus {cfg.corpus.kind}. Metrics are logged at step = tokens.")
    return metrics  # (the model is freed here, before the next revision is loaded and this one evicted)


