"""MLflow tracking of screens: one run per (model, revision, corpus, screen), in an experiment per study.

The store itself (layout, lock, migration, retry, one-line I/O failures, dead runs) is
:mod:`emergence.common.store`, shared with ``stats``. What the screening side adds, so that many
jobs (one machine, a cluster, two people) share one store:

- **A run is claimed before its screen starts** (:meth:`Tracker.claim`): the job creates the run,
  RUNNING, tagged with the identity hash (:func:`config_hash`), host, pid and a heartbeat, then
  re-reads the runs of that hash: a complete run wins (under ``force``, only one finished since);
  a loser deletes its claim and skips the revision. A SQLite store claims under its file lock
  (atomic). On a server (or a ``file:`` store) a claim is created ``pending`` and wins (tagged
  ``won``) only when its re-read, after ``tracking.claim_settle_s``, shows no other live claim; it
  yields to a won claim or an earlier pending one (start time, then run id) and waits for later
  pending ones (:meth:`Tracker._verdict`). Safe whenever a read shows every write that returned
  before it: of two claims, the one created second sees the first, so two claims that each saw no
  rival cannot exist. Two jobs never both screen one identity.
- **A run finishing second deletes itself** and raises :class:`ClaimLost` when another complete
  run of its identity is there (not one kept under ``force``): a last line of defence, for a
  claim taken for dead while its process was only frozen.
- **Dead claims are cleaned, never duplicated.** A RUNNING claim whose process is gone
  (:func:`emergence.common.store.claim_alive`), and a FAILED or KILLED run, is deleted with its
  artifacts by the next job of its identity; a killed job rerun leaves exactly one run. A dead
  sweep's parent run (host, pid, heartbeat: :func:`parent_heartbeat`) is marked KILLED by the
  next sweep or job (:func:`emergence.common.store.end_dead_runs`).
- **A run is complete or marked**: tagged ``emergence.status = complete`` last, then FINISHED;
  a screen that raises marks its run FAILED with the error in ``emergence.error``.

Metrics are logged at ``step = tokens``, so every chart shares one axis across models (the
training step is the ``step`` param and ``train_step`` metric); a parent run also gets each
screened revision's curves (:func:`curve_metrics`).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from typing import TYPE_CHECKING, Dict, Iterable, Mapping, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from emergence.common.contract import (CLAIM_PENDING, CLAIM_STATE_TAG, CLAIM_WON, CONFIG_ARTIFACT, CONFIG_HASH_TAG,
    ERROR_TAG, FRACTION, HEADS_ARTIFACT, HEARTBEAT_TAG, HOST_TAG, INDUCTION_LOSS_METRIC, KIND_TAG, MODEL_TAG,
    NOTE_TAG, NULL_FREE_IDENTITY_KEYS, PARENT_TAG, PID_TAG, PR_MEAN_METRIC, RUN_NAME_TAG, STATUS_COMPLETE,
    STATUS_TAG, SWEEP_TAG, THROUGHPUT_PARAMS, count_metric, fraction_metric, parse_metric)
from emergence.common.store import (Heartbeat, claim_alive, drop_artifacts, end_dead_runs, is_complete,
                                      prepare_store, quick_if_failed_before, retry, server_timeouts, sqlite_file,
                                      store_io, store_lock)
from emergence.revisions import Revision

if TYPE_CHECKING:
    import pandas as pd
    from mlflow import MlflowClient

#: The main metrics, also logged to a sweep's parent run as ``<model>/<metric>`` curves.
CURVE_METRICS = (fraction_metric("bos"), count_metric("induction"), count_metric("bos"), INDUCTION_LOSS_METRIC,
                 PR_MEAN_METRIC, "screen_seconds")


def curve_metrics(model: str, values: Mapping[str, float]) -> Dict[str, float]:
    """A screened revision's curves in a parent run: ``fraction.<class>.<model>`` for every
    class fraction in ``values`` and ``<model>/<metric>`` for :data:`CURVE_METRICS`, the model's
    name made a metric key (only letters, digits and ``_ - . /``, spaces made ``_``:
    ``toy_neox [seed 3]`` -> ``toy_neox_seed_3``)."""
    model = "_".join("".join(ch for ch in model if ch.isalnum() or ch in "_-./ ").split())
    out = {f"{key}.{model}": float(v) for key, v in values.items()
           if (p := parse_metric(key)) is not None and p.kind == FRACTION}
    out.update({f"{model}/{key}": float(values[key]) for key in CURVE_METRICS if key in values})
    return out


def _drop(identity: dict, name: str, only_null: bool) -> None:
    """Remove the dotted key ``name`` from ``identity`` (with ``only_null``: only when it is null)."""
    *parents, key = name.split(".")
    node = identity
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and (not only_null or node.get(key, 0) is None):
        node.pop(key, None)


def config_hash(cfg: DictConfig, revision: Revision) -> str:
    """The identity of a run: model config, revision name, corpus and screen, without the settings
    that only change how much goes through one forward pass (the contract's THROUGHPUT_PARAMS)."""
    identity = {
        "model": OmegaConf.to_container(cfg.model, resolve=True),
        "revision": revision.name,
        "corpus": OmegaConf.to_container(cfg.corpus, resolve=True),
        "screen": OmegaConf.to_container(cfg.screen, resolve=True),
    }
    for name in THROUGHPUT_PARAMS:
        _drop(identity, name, only_null=False)
    for name in NULL_FREE_IDENTITY_KEYS:  # keys added later: a null one leaves the hash as it was
        _drop(identity, name, only_null=True)
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _order(run) -> Tuple[int, str]:
    """The order in which rival claims yield: start time, then run id."""
    return (run.info.start_time or 0, run.info.run_id)


class ClaimLost(Exception):
    """A claimed run found, when it was completed, another complete run of its identity: it deleted
    itself (the store keeps one run per identity)."""


def flatten(container: Mapping, prefix: str = "") -> Dict[str, str]:
    out: Dict[str, str] = {}
    for key, value in container.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
    return out


def open_experiment(uri: str, experiment: str, artifacts: Optional[str], stale_after_s: float, timeout_s: float,
                    what: str) -> Tuple[str, MlflowClient]:
    """Bound the server's calls, prepare the store and experiment, end its dead runs. A failure to end the
    dead runs is worded "cannot {what}"; :func:`prepare_store` keeps its own ("cannot create or open")."""
    import mlflow

    server_timeouts(uri, timeout_s)
    experiment_id = prepare_store(uri, experiment, artifacts)
    client = mlflow.MlflowClient(uri)
    with store_io(uri, what):
        end_dead_runs(client, experiment_id, stale_after_s)
    return experiment_id, client


class Tracker:
    """The MLflow store and experiment of a study (``tracking`` config group). Every method that
    reads or writes the store raises :class:`emergence.common.store.StoreError` (one line) on an
    I/O failure of the store."""

    def __init__(self, tracking_cfg, parent_run: Optional[str] = None):
        """``parent_run``: the run the job's runs nest under (else ``tracking.parent_run``)."""
        import mlflow

        self.uri = tracking_cfg.uri
        #: Seconds a call to a tracking server may go unanswered (emergence/common/store.py).
        self.timeout_s = float(getattr(tracking_cfg, "timeout_s", 60.0))
        mlflow.set_tracking_uri(self.uri)
        self.parent_run: Optional[str] = parent_run or tracking_cfg.parent_run
        self.heartbeat_s = float(tracking_cfg.heartbeat_s)
        self.stale_after_s = float(tracking_cfg.stale_after_s)
        self.settle_s = float(tracking_cfg.claim_settle_s)
        #: The live run that held the identity at this job's last lost claim (None: done, or won).
        self.last_holder = None
        #: This job's won claims: run id -> (identity hash, the complete runs kept beside it under force).
        self._claims: Dict[str, Tuple[str, frozenset]] = {}
        self.experiment_id, self.client = open_experiment(self.uri, tracking_cfg.experiment, tracking_cfg.artifacts,
                                                          self.stale_after_s, self.timeout_s, "use")

    def _io(self, what: str = "use"):
        return store_io(self.uri, what)

    # -- reading
    def _runs_of(self, digest: str):
        return retry(self.client.search_runs, [self.experiment_id],
                     filter_string=f"tags.`{CONFIG_HASH_TAG}` = '{digest}'", max_results=1000)

    def _complete(self, tag: str, value: str, max_results: int):
        with self._io("read"):
            return retry(self.client.search_runs, [self.experiment_id],
                         filter_string=f"tags.`{tag}` = '{value}' and tags.`{STATUS_TAG}` = '{STATUS_COMPLETE}' "
                                       "and attributes.status = 'FINISHED'",
                         max_results=max_results)

    def finished_run(self, digest: str):
        runs = self._complete(CONFIG_HASH_TAG, digest, 1)
        return runs[0] if runs else None

    def complete_runs(self, model: str):
        """Every complete, FINISHED run of ``model`` in the experiment (any corpus or screen)."""
        return self._complete(MODEL_TAG, model, 50000)

    # -- claiming
    def _delete(self, run) -> None:
        """Delete an orphan (or a lost claim) and its artifacts."""
        try:
            retry(self.client.delete_run, run.info.run_id)
        except Exception:  # noqa: BLE001  (already deleted by a rival cleaner)
            pass
        drop_artifacts(run, self.uri)

    def claim(self, digest: str, run_name: str, tags: Mapping[str, str],
              force: bool = False) -> Tuple[Optional[str], str]:
        """Claim the run of one identity (module rules): ``(run_id, "")`` when this job is to screen it,
        ``(None, why)`` when it is done or another job holds it (then :attr:`last_holder`)."""
        self.last_holder = None
        local = sqlite_file(self.uri) is not None  # claimed under the store's file lock
        with self._io("write to"), store_lock(self.uri):
            if not force:
                done = self.finished_run(digest)
                if done is not None:
                    return None, f"done before (run {done.info.run_id[:8]})"
            kept = set()
            for run in self._runs_of(digest):
                if is_complete(run) and not force:  # finished since finished_run read the store
                    return None, f"done by another job (run {run.info.run_id[:8]})"
                if is_complete(run):
                    kept.add(run.info.run_id)  # force=true: kept beside the new one (only then)
                elif run.info.status == "RUNNING" and claim_alive(run, self.stale_after_s):
                    if local:  # under the lock: that live claim holds it
                        self.last_holder = run
                        return None, self._holder(run)
                else:
                    self._delete(run)  # dead claim, FAILED, KILLED or unfinished: an orphan
            now = time.time()
            all_tags = {**tags, RUN_NAME_TAG: run_name, HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()),
                        HEARTBEAT_TAG: f"{now:.3f}", KIND_TAG: "screen", CONFIG_HASH_TAG: digest,
                        CLAIM_STATE_TAG: CLAIM_WON if local else CLAIM_PENDING}
            if self.parent_run:
                all_tags[PARENT_TAG] = self.parent_run
            mine = retry(self.client.create_run, self.experiment_id, run_name=run_name, tags=all_tags)
            run_id = mine.info.run_id
            holder = self._settle(digest, run_id, kept, pause=0.0 if local else self.settle_s)
            if holder is not None:
                self._delete(mine)
                if is_complete(holder):
                    return None, f"done by another job (run {holder.info.run_id[:8]})"
                self.last_holder = holder
                return None, self._holder(holder)
            if not local:
                retry(self.client.set_tag, run_id, CLAIM_STATE_TAG, CLAIM_WON)
        self._claims[run_id] = (digest, frozenset(kept))
        return run_id, ""

    def _settle(self, digest: str, mine: str, kept: set, pause: float):
        """Decide the claim ``mine`` (just created): None when this job screens the identity, else the
        run that holds it (:meth:`_verdict`, re-read until it is not ``wait``)."""
        deadline = time.time() + self.timeout_s
        beat = time.time()
        while True:
            if pause > 0:
                time.sleep(pause)
            verdict, holder = self._verdict(self._runs_of(digest), mine, kept)
            if verdict != "wait" or time.time() > deadline:  # (yielding is safe: the rival wins or yields in turn)
                return holder
            if time.time() - beat > self.heartbeat_s:  # a claim that waits stays alive
                beat = time.time()
                retry(self.client.set_tag, mine, HEARTBEAT_TAG, f"{beat:.3f}")
            pause = max(self.settle_s, 0.2)

    def _verdict(self, runs, mine: str, kept: set):
        """``("won", None)``, ``("lost", holder)`` or ``("wait", rival)`` for the claim ``mine`` from its
        identity's runs re-read after it was created (module rules: why this is safe; the order, start
        time then run id, only decides who yields)."""
        own = [r for r in runs if r.info.run_id == mine]
        done = [r for r in runs if r.info.run_id not in kept and r.info.run_id != mine
                and (is_complete(r) or (r.data.tags.get(STATUS_TAG) == STATUS_COMPLETE and r.info.status == "RUNNING"
                                        and claim_alive(r, self.stale_after_s)))]  # (tagged complete, ending now)
        if done:
            return "lost", min(done, key=_order)
        rivals = [r for r in runs if r.info.run_id != mine and r.info.status == "RUNNING"
                  and r.data.tags.get(STATUS_TAG) != STATUS_COMPLETE and claim_alive(r, self.stale_after_s)]
        if not own:  # this claim was deleted (taken for dead): never screen on it
            return "lost", min(rivals, key=_order) if rivals else None
        if not rivals:
            return "won", None
        won = [r for r in rivals if r.data.tags.get(CLAIM_STATE_TAG, CLAIM_WON) != CLAIM_PENDING]
        earlier = [r for r in rivals if _order(r) < _order(own[0])]
        if won or earlier:
            return "lost", min(won or earlier, key=_order)
        return "wait", min(rivals, key=_order)

    @staticmethod
    def _holder(run) -> str:
        tags = run.data.tags
        return (f"claimed by another job (run {run.info.run_id[:8]}, host {tags.get(HOST_TAG, '?')}, "
                f"pid {tags.get(PID_TAG, '?')})")

    def heartbeat(self, run_id: str) -> Heartbeat:
        return Heartbeat(self.client, run_id, self.heartbeat_s)

    # -- writing a claimed run
    def complete(self, run_id: str, *, params: Mapping[str, str], metrics: Mapping[str, float],
                 heads: pd.DataFrame, config_yaml: str, step: int = 0, note: Optional[str] = None) -> None:
        """Write params, metrics (at ``step``) and artifacts into a claimed run, tag it complete, end it
        FINISHED (then :meth:`_yield_to_complete`)."""
        from mlflow.entities import Metric, Param, RunTag

        stamp = int(time.time() * 1000)
        with self._io("write to"):
            retry(self.client.log_batch, run_id,
                  params=[Param(k, str(v)[:6000]) for k, v in params.items()],
                  metrics=[Metric(k, float(v), stamp, int(step)) for k, v in metrics.items()],
                  tags=[RunTag(NOTE_TAG, note)] if note else [])
            retry(self.client.log_text, run_id, heads.to_csv(index=False), HEADS_ARTIFACT)
            retry(self.client.log_text, run_id, config_yaml, CONFIG_ARTIFACT)
            retry(self.client.set_tag, run_id, STATUS_TAG, STATUS_COMPLETE)
            retry(self.client.set_terminated, run_id, "FINISHED")
            self._yield_to_complete(run_id)  # of two runs finishing at once, the second sees the first
        self._claims.pop(run_id, None)

    def _yield_to_complete(self, run_id: str) -> None:
        """Raise :class:`ClaimLost`, after deleting this run, when another run of its identity (not one
        kept beside it under ``force``) is complete: a run finishing second never stays."""
        if run_id not in self._claims:  # (a run this tracker did not claim: nothing to compare)
            return
        digest, kept = self._claims[run_id]
        others = [r for r in self._runs_of(digest)
                  if is_complete(r) and r.info.run_id != run_id and r.info.run_id not in kept]
        if others:
            self._claims.pop(run_id)
            self._delete(retry(self.client.get_run, run_id))
            raise ClaimLost(f"done by another job (run {min(others, key=_order).info.run_id[:8]}); "
                            f"this job's run {run_id[:8]} of the same identity was deleted")

    def fail(self, run_id: str, error: BaseException, status: str = "FAILED") -> None:
        """Mark a claimed run FAILED (or KILLED for Ctrl-C) with the error as a tag."""
        text = f"{type(error).__name__}: {error}".strip()
        quick_if_failed_before(self.uri)  # the store failed already: one quick try (the claim is cleaned on resume)
        try:
            retry(self.client.set_tag, run_id, ERROR_TAG, text[:4900], attempts=10)
            retry(self.client.set_terminated, run_id, status, attempts=10)
        except Exception:  # noqa: BLE001  (the store itself is failing: the claim is cleaned on resume)
            pass

    def log_curves(self, points: Iterable[Tuple[str, Mapping[str, float], int]]) -> None:
        """Log each point's :func:`curve_metrics` into the parent run, at ``step = tokens``."""
        if not self.parent_run:
            return
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        metrics = [Metric(name, value, stamp, int(tokens))
                   for model, values, tokens in points for name, value in curve_metrics(model, values).items()]
        if metrics:
            try:
                retry(self.client.log_batch, self.parent_run, metrics=metrics)
            except Exception:  # noqa: BLE001  (the parent is a convenience; the runs hold the data)
                pass


# --- a sweep's parent run -------------------------------------------------------------------

def start_parent(uri: str, experiment: str, artifacts: Optional[str], sweep: str, name: str, model: str,
                 n_jobs: int, stale_after_s: float, timeout_s: float = 60.0) -> Tuple[str, str]:
    """Prepare the store and experiment, end the runs of dead sweeps and jobs there
    (:func:`end_dead_runs`), and create the parent run of ``model``'s jobs (RUNNING; its heartbeat:
    :func:`parent_heartbeat`), tagged with the model so that the UI's view grouped by model holds
    it in its model's group. Returns ``(experiment_id, run_id)``."""
    exp_id, client = open_experiment(uri, experiment, artifacts, stale_after_s, timeout_s, "write to")
    with store_io(uri, "write to"):
        run = retry(client.create_run, exp_id, run_name=name,
                    tags={KIND_TAG: "sweep", SWEEP_TAG: sweep, RUN_NAME_TAG: name, MODEL_TAG: model,
                          "emergence.jobs": str(n_jobs),
                          HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()),
                          HEARTBEAT_TAG: f"{time.time():.3f}"})
    return exp_id, run.info.run_id


def parent_heartbeat(uri: str, run_id: str, every_s: float) -> Heartbeat:
    """The heartbeat of a parent run (a context manager), kept while its jobs run."""
    import mlflow

    return Heartbeat(mlflow.MlflowClient(uri), run_id, every_s)


def end_parent(uri: str, run_id: str, failed: Iterable[str], status: Optional[str] = None, strict: bool = False) -> None:
    """End a parent run: FINISHED, or FAILED naming the failed jobs (or ``status``). A store that cannot
    take it raises with ``strict`` (a job that succeeded otherwise must not exit 0), else is ignored
    (the next job ends the run KILLED); one quick try when the store failed earlier in this process."""
    import mlflow

    quick_if_failed_before(uri)
    client = mlflow.MlflowClient(uri)
    failed = list(failed)
    try:
        with store_io(uri, "write to"):
            retry(client.set_tag, run_id, "emergence.failed_jobs", str(len(failed)))
            if failed:
                retry(client.set_tag, run_id, ERROR_TAG, "; ".join(failed)[:4900])
            retry(client.set_terminated, run_id, status or ("FAILED" if failed else "FINISHED"))
    except Exception:  # noqa: BLE001  (StoreError or any other failure of the store)
        if strict:
            raise
