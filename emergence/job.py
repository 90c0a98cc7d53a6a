"""One job: config -> registry -> model at revision -> probe -> screens -> tracking.

A job screens the revisions its ``revision`` config selects (under ``-m`` the sweeper
pins one revision per job). Every input is checked before any model is loaded or any
run is opened, so bad input leaves nothing behind.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from emergence import EmergenceError
from emergence import registry
from emergence.loading import choose_device, choose_dtype, evict, fetch_revision, load, plan_batch_size
from emergence.prefetch import FetchFailed, Pipeline
from emergence.probes import CHECKS as CORPUS_CHECKS, CORPORA, ModelLimits, build_probe, check_corpus
from emergence.revisions import Revision
from emergence.screens import check_screen, recipe_for, screen
from emergence.tracking import CONFIG_HASH_TAG, SWEEP_TAG, Tracker, config_hash, flatten

SUMMARY_METRICS = ("fraction.bos", "count.induction", "induction_loss")


@dataclass
class RevisionResult:
    model: str
    revision: Revision
    run_id: str
    metrics: Dict[str, float]
    skipped: bool


def validate(cfg: DictConfig) -> List[Revision]:
    """Check every user-given value; returns the revisions to screen."""
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
    if cfg.model.path and cfg.model.revisions != "toy":
        from pathlib import Path

        if not Path(cfg.model.path).is_dir():
            raise EmergenceError(f"model.path={cfg.model.path!r} does not exist; give a folder holding one "
                                 "HF model folder per revision")
    revisions = registry.selected_revisions(cfg.model, cfg.revision)
    if cfg.corpus.kind in CORPUS_CHECKS:
        note = check_corpus(cfg.corpus, declared_limits(cfg.model, revisions))
        if note:
            import sys

            print(f"note: {note}", file=sys.stderr)
    return revisions


def declared_limits(model_cfg, revisions: List[Revision]) -> Optional[ModelLimits]:
    """A model's vocabulary and context as declared before any weights are loaded: the toy
    recipe, else the ``config.json`` of the first revision (a local folder, or the HF cache
    without the network); None when unknown (the probe is then checked after loading)."""
    if model_cfg.revisions == "toy":
        return ModelLimits(int(model_cfg.recipe.corpus.vocab_size), int(model_cfg.recipe.seq_len), model_cfg.name)
    if not revisions:
        return None
    from pathlib import Path

    from transformers import AutoConfig

    try:
        if model_cfg.path:
            config = AutoConfig.from_pretrained(str(Path(model_cfg.path) / revisions[0].name))
        else:
            config = AutoConfig.from_pretrained(model_cfg.repo, revision=revisions[0].name, local_files_only=True)
    except Exception:  # not cached, or no config yet: checked after loading instead
        return None
    context = getattr(config, "max_position_embeddings", None)
    return ModelLimits(int(config.vocab_size), int(context) if context else None, model_cfg.name)


def sweep_id(cfg: DictConfig) -> str:
    if cfg.tracking.sweep:
        return str(cfg.tracking.sweep)
    try:
        from hydra.core.hydra_config import HydraConfig

        hc = HydraConfig.get()
        return hc.sweep.dir if hc.mode.name == "MULTIRUN" else hc.run.dir
    except ValueError:  # outside a Hydra app
        return f"adhoc-{time.strftime('%Y%m%d-%H%M%S')}"


def run_params(cfg: DictConfig, revision: Revision, adapter) -> Dict[str, str]:
    params = flatten(OmegaConf.to_container(cfg, resolve=True))
    params.update({
        "model": cfg.model.name, "revision": revision.name, "step": str(revision.step),
        "tokens": str(revision.tokens), "family": cfg.model.family,
        "pretraining_corpus": cfg.model.pretraining_corpus,
        "n_layers": str(adapter.n_layers), "n_heads": str(adapter.n_heads),
        "head_dim": str(adapter.head_dim),
    })
    return params


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
    """The job's download pipeline (emergence/prefetch.py): revision i+1 is fetched in the
    background while revision i is screened; with ``cache.evict=true`` a hub revision is
    deleted from the HF cache once the job has moved past it (screened or failed; not one
    claimed by another job), so at most two are on disk. Revisions with a finished run (and
    no ``force``) are not fetched; the toy suite is trained here, before the pipeline starts,
    not in its thread."""
    from pathlib import Path

    from emergence.loading import checkpoint_location

    hub = bool(cfg.model.repo) and not cfg.model.path and cfg.model.revisions != "toy"
    done = set() if cfg.force else {r.name for r in revisions
                                    if tracker.finished_run(config_hash(cfg, r)) is not None}
    toy_folder = None
    todo = [r for r in revisions if r.name not in done]
    if cfg.model.revisions == "toy" and todo:  # trained (once) here, in the main thread
        toy_folder = Path(checkpoint_location(cfg.model, todo[0], cfg.cache.toy_dir, progress)[0]).parent

    def fetch(revision: Revision):
        if revision.name in done:
            return None
        if toy_folder is not None:
            return str(toy_folder / revision.name)
        return fetch_revision(cfg.model, revision, known, cfg.cache.toy_dir, progress)

    def drop(revision: Revision, _folder) -> None:
        if revision.name in claimed:  # never a revision another job may be screening from this cache
            evict(cfg.model.repo, revision.name)

    claimed: set = set()
    pipeline = Pipeline(revisions, fetch, drop if (hub and cfg.cache.evict) else None)
    pipeline.claimed = claimed  # run_job adds the revisions it claims
    return pipeline


def run_job(cfg: DictConfig, progress: bool = True) -> List[RevisionResult]:
    """Screen the selected revisions, one claimed MLflow run each (emergence/tracking.py).

    A revision whose run is complete is skipped (unless ``force``), one claimed by a live
    job elsewhere is skipped with a note; a revision whose screen raises gets its run
    FAILED (the error as a tag) and the others go on; :class:`JobFailed` at the end names
    the failed ones. Ctrl-C marks the run being screened KILLED. Revisions come through the
    download pipeline (:func:`revision_pipeline`): one fetched ahead; a revision that cannot
    be fetched fails its own run (:class:`emergence.prefetch.FetchFailed`) and the others go on.
    The batch size comes from the memory budget (:func:`emergence.loading.plan_batch_size`)."""
    import sys

    revisions = validate(cfg)
    tracker = Tracker(cfg.tracking)
    sweep = sweep_id(cfg)
    results: List[RevisionResult] = []
    failures: List[str] = []
    known = registry.model_revisions(cfg.model)  # once per job, not once per revision
    pipeline = revision_pipeline(cfg, revisions, known, tracker, progress)
    bar = tqdm(pipeline, total=len(revisions), desc=f"{cfg.model.name}", unit="rev",
               disable=not progress or len(revisions) < 2)
    for fetched in bar:
        revision = fetched.item
        loaded = None
        bar.set_postfix_str(revision.name)
        digest = config_hash(cfg, revision)
        run_name = f"{cfg.model.name}@{revision.name}:{cfg.screen.name}"
        tags = {CONFIG_HASH_TAG: digest, SWEEP_TAG: sweep, "emergence.model": cfg.model.name,
                "emergence.revision": revision.name, "emergence.tokens": str(revision.tokens),
                "emergence.screen": cfg.screen.name}
        run_id, why = tracker.claim(digest, run_name, tags, force=bool(cfg.force))
        if run_id is not None:
            pipeline.claimed.add(revision.name)
        else:
            done = tracker.finished_run(digest)
            if done is not None:
                results.append(RevisionResult(cfg.model.name, revision, done.info.run_id,
                                              dict(done.data.metrics), skipped=True))
                tracker.log_curves([(cfg.model.name, done.data.metrics, revision.tokens)])
            else:
                print(f"{run_name}: {why}; skipped", file=sys.stderr)
            continue
        try:
            with tracker.heartbeat(run_id):
                if fetched.error is not None:  # this revision only: recorded, the others go on
                    raise FetchFailed(str(fetched.error))
                tic = time.perf_counter()
                loaded = load(cfg.model, revision, known=known, device=cfg.device,
                              toy_dir=cfg.cache.toy_dir, progress=progress, folder=fetched.value)
                load_seconds = time.perf_counter() - tic
                tic = time.perf_counter()
                probe = build_probe(cfg.corpus, loaded.model.config, loaded.tokenizer)
                plan = plan_batch_size(loaded.model.config, probe.seq_len, loaded.dtype, loaded.device,
                                       cfg.screen.get("memory_gb"), cfg.corpus.batch_size)
                probe.batch_size = plan.batch_size
                result = screen(loaded.model, loaded.adapter, probe, cfg.screen, progress=progress,
                                description=f"{cfg.model.name}@{revision.name}")
                screen_seconds = time.perf_counter() - tic
                metrics = dict(result.metrics)
                metrics.update({"tokens": float(revision.tokens), "train_step": float(revision.step),
                                "screen_seconds": screen_seconds, "load_seconds": load_seconds,
                                "fetch_wait_seconds": fetched.waited_s})
                params = run_params(cfg, revision, loaded.adapter)
                params.update(result.params)
                params.update({"probe": probe.description, "dtype": str(loaded.dtype).replace("torch.", ""),
                               "device": str(loaded.device), "source": loaded.source,
                               "batch_size": str(plan.batch_size), "memory_budget": plan.describe()})
                tracker.complete(run_id, params=params, metrics=metrics, heads=result.heads,
                                 config_yaml=OmegaConf.to_yaml(cfg, resolve=True), step=revision.tokens,
                                 note=_run_note(cfg, revision))
        except KeyboardInterrupt as exc:
            tracker.fail(run_id, exc, status="KILLED")
            raise
        except EmergenceError as exc:
            tracker.fail(run_id, exc)
            raise
        except Exception as exc:  # noqa: BLE001  (recorded; the job's other revisions go on)
            tracker.fail(run_id, exc)
            failures.append(f"{revision.name}: {type(exc).__name__}: {exc}")
            print(f"{run_name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        finally:
            del loaded  # before the next revision is loaded (and this one evicted)
        results.append(RevisionResult(cfg.model.name, revision, run_id, metrics, skipped=False))
        tracker.log_curves([(cfg.model.name, metrics, revision.tokens)])
    if failures:
        raise JobFailed(f"{cfg.model.name}: {len(failures)} of {len(revisions)} revision(s) failed: "
                        + "; ".join(failures), results)
    return results


def format_table(results: List[RevisionResult]) -> str:
    """Per model: tokens, BOS fraction, induction count, induction loss, per revision."""
    lines = []
    for model in dict.fromkeys(r.model for r in results):
        rows = [r for r in results if r.model == model]
        lines.append(f"{model}")
        lines.append(f"  {'revision':<24}{'tokens':>14}{'BOS frac':>10}{'induction':>11}{'ind. loss':>11}  run")
        for r in sorted(rows, key=lambda r: r.revision):
            m = r.metrics
            frac = m.get("fraction.bos")
            count = m.get("count.induction")
            loss = m.get("induction_loss")
            lines.append(
                f"  {r.revision.name:<24}{r.revision.tokens:>14,}"
                f"{'' if frac is None else f'{frac:.1%}':>10}"
                f"{'' if count is None else f'{count:.0f}':>11}"
                f"{'' if loss is None else f'{loss:.3f}':>11}"
                f"  {r.run_id[:8]}{' (done before)' if r.skipped else ''}")
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
    for model in dict.fromkeys(r.model for r in results):
        ordered = sorted((r for r in results if r.model == model), key=lambda r: r.revision)

        def first(metric: str) -> str:
            hit = next((r for r in ordered if r.metrics.get(metric, 0) >= 1), None)
            return "none" if hit is None else f"{_tokens(hit.revision.tokens)} ({hit.revision.name})"

        layers = sorted({int(k[len("layer"):].split(".")[0]) for r in ordered for k, v in r.metrics.items()
                         if k.startswith("layer") and k.endswith(".count.bos") and v > 0})
        loss = [r.metrics.get("induction_loss", float("nan")) for r in ordered]
        rows.append({"model": model, "induction heads from": first("count.induction"),
                     "BOS heads from": first("count.bos"),
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
    """Run ``python -m stats`` on this job's models (a subprocess: stats never imports
    the model code, and has its own Hydra app). Returns its last line of output."""
    import subprocess
    import sys

    from emergence import PROJECT_ROOT

    cmd = [sys.executable, "-m", "stats", f"source.tracking_uri={cfg.tracking.uri}",
           f"source.experiment={cfg.tracking.experiment}", f"source.models=[{','.join(models)}]",
           f"tracking.uri={cfg.tracking.uri}",
           f"tracking.artifacts={cfg.tracking.artifacts if cfg.tracking.artifacts else 'null'}"]
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True)
    out = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode == 0 and out:
        return out[-1]  # stats' own one-line summary (its progress bars go to stderr)
    lines = out + [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "rror" in line and "HYDRA_FULL_ERROR" not in line]
    return (f"stats report failed (exit {proc.returncode}): {errors[-1] if errors else 'no output'}\n"
            f"  rerun it with: {' '.join(cmd[1:]).replace(sys.executable, 'python')}")


def ui_command(uri: str) -> str:
    return f"mlflow ui --backend-store-uri {uri}"


# --- dry run: the planned jobs, offline ---------------------------------------------------------

@dataclass
class PlannedJob:
    model: str
    revision: Revision
    #: What a screen of this revision downloads, as far as the local HF cache knows.
    download: str


def _size(n: float) -> str:
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def _folder_bytes(folder) -> int:
    from pathlib import Path

    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def download_sizes(model_cfg, revisions: List[Revision]) -> Dict[str, str]:
    """Per revision name: ``cached, <size>`` when the local HF cache holds it (its size on disk,
    i.e. what a screen would otherwise download), ``local, <size>`` for a checkpoint folder,
    else ``unknown``. Reads the disk only (``huggingface_hub.scan_cache_dir``), never the hub."""
    from pathlib import Path

    out = {r.name: "unknown" for r in revisions}
    if model_cfg.path and model_cfg.revisions != "toy":
        for r in revisions:
            folder = Path(model_cfg.path) / r.name
            if folder.is_dir():
                out[r.name] = f"local, {_size(_folder_bytes(folder))}"
        return out
    if model_cfg.revisions == "toy":
        return {r.name: "toy (trained here)" for r in revisions}
    if not model_cfg.repo:
        return out
    from huggingface_hub import scan_cache_dir

    try:
        cache = scan_cache_dir()
    except Exception:  # noqa: BLE001  (no cache folder yet)
        return out
    for info in cache.repos:
        if info.repo_id != model_cfg.repo:
            continue
        for cached in info.revisions:
            for r in revisions:
                if r.name in cached.refs or cached.commit_hash == r.name:
                    out[r.name] = f"cached, {_size(cached.size_on_disk)}"
    return out


def plan_jobs(cfg: DictConfig) -> List[PlannedJob]:
    """The jobs ``cfg`` would run (after the same checks as a real run), without loading a
    model, opening MLflow or reaching the hub: revisions come from the stored snapshots."""
    revisions = validate(cfg)
    sizes = download_sizes(cfg.model, revisions)
    return [PlannedJob(cfg.model.name, r, sizes[r.name]) for r in revisions]


def format_plan(jobs: List[PlannedJob], screen: str = "") -> str:
    lines = [f"{'#':>3}  {'model':<20}{'revision':<26}{'step':>9}{'tokens':>18}  download"]
    for i, job in enumerate(jobs):
        r = job.revision
        lines.append(f"{i:>3}  {job.model:<20}{r.name:<26}{r.step:>9,}{r.tokens:>18,}  {job.download}")
    lines.append(f"dry run: {len(jobs)} job(s){f', screen {screen}' if screen else ''}; "
                 "no model loaded, no run logged")
    return "\n".join(lines)
