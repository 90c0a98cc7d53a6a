"""The framework-free live monitor: ``monitor.step(model, step, tokens)`` in any training loop.

Called after every optimizer step, it screens the model where the schedule says (with the
small live probe, the training unchanged), saves the checkpoint(s) the schedule asks for and
logs the screen as a run (in a background thread); True when it saved a checkpoint of this
step (a loop that resumes saves its optimizer state then, with :meth:`state_dict`). The
example of a plain PyTorch loop: docs/live.md (run as written by tests/emergence/test_live_monitor.py).

Safety: a screen that raises (a probe the model cannot read, a model the screens do not
support) is reported once on stderr; training and the sparse saves go on and the screen
is tried again at the next save. A store that cannot be written is handled by the
writer (reported once, retried at each save). Neither ever raises into the training loop.

Lookback (``live.lookback``): after a screen whose checkpoint is not saved, the monitor
keeps a CPU copy of the weights (and the config); if the next screen triggers, that
copy is saved too, so the jump lies between two saved checkpoints one watch step apart.
It costs one copy of the weights in host memory.
"""

from __future__ import annotations

import copy
import time
from types import SimpleNamespace
from typing import List, Optional

from emergence.adapters import adapter_for
from emergence.common.checks import first_line
from emergence.common.contract import INDUCTION_LOSS_METRIC, PROBE_PARAM, count_metric
from emergence.live.checkpoints import CheckpointFolder
from emergence.live.detector import Observation
from emergence.live.schedule import SCHEDULES, Decision
from emergence.live.screening import screen_in_training
from emergence.live.run_writer import LiveRecord, RunWriter, report
from emergence.live.view import live_view
from emergence.probes import build_probe
from emergence.revisions import Revision


class LiveMonitor:
    """Screens a model while it trains and decides where its checkpoints are saved. ``cfg``: a composed
    emergence config whose model is a ``revisions: folder`` model, its ``path`` where the checkpoints
    go (:func:`emergence.live.folder_config`); the runs are logged under its :func:`live_view`."""

    def __init__(self, cfg, checkpoints: Optional[CheckpointFolder] = None, tokenizer=None):
        if SCHEDULES.get(cfg.live.mode) is None:
            raise ValueError(f"live.mode={cfg.live.mode!r} runs no monitor; valid: "
                             f"{', '.join(k for k, v in SCHEDULES.items() if v is not None)}")
        self.cfg = live_view(cfg)
        self.schedule = SCHEDULES[cfg.live.mode](cfg.live)
        self.checkpoints = checkpoints or CheckpointFolder(cfg.model.path)
        self.writer = RunWriter(self.cfg)
        self.tokenizer = tokenizer
        self.probe = self.adapter = self._shape = None
        self._held = None      # (revision, state_dict copy, config copy) of the last unsaved screen
        self._pending = None   # its LiveRecord, logged once the next screen decides whether it is saved
        self._screen_failed_reported = False
        #: steps whose save was decided but is written by the caller (``writes_current=False``)
        self._decided: set = set()
        self.last: Optional[Observation] = None
        self.screens = 0
        self.screen_seconds = 0.0
        #: Wall time inside :meth:`step` (screens, lookback copies, checkpoint writes): the monitor's
        #: cost to the training thread (the store is written by another thread).
        self.seconds = 0.0
        self.failures = 0

    # -- the loop's side
    def step(self, model, step: int, tokens: int, final: bool = False) -> bool:
        """Screen if a screen is due at ``step`` (``final``: always, and save); True when a
        checkpoint of ``step`` is saved: written by the monitor, or, with
        ``checkpoints.writes_current=False``, to be written by the caller (then :meth:`saved`)."""
        step, tokens = int(step), int(tokens)
        if final and (step in self.checkpoints.steps() or step in self._decided):
            return False
        if not final and not self.schedule.due(step):
            return False
        tic = time.perf_counter()
        try:
            if final and self.schedule.last_screened == step:  # screened, not saved: save that screen
                revision = self._pending.revision if self._pending is not None else self._revision(step, tokens)
                return self._save_current(model, revision, self._pending)
            return self._screen_and_decide(model, step, tokens, force_save=final)
        finally:
            self.seconds += time.perf_counter() - tic

    def finish(self) -> None:
        """At the end of training (after the last step's :meth:`step` with ``final``): the pending
        screen logged, the writer drained and stopped, the listing marked complete."""
        self._flush_pending()
        self.writer.close()
        self.checkpoints.write_listing(complete=True)

    def saved(self, model, step: int, tokens: int, write: bool = False) -> None:
        """The caller saved a checkpoint of ``step`` (the HF ``Trainer``, after :meth:`step` returned
        True, or on its own schedule): list it, screened once (now, if this step was not screened).
        ``write``: the caller did not write it; the monitor writes ``model`` now."""
        step, tokens = int(step), int(tokens)
        if step not in self._decided and step not in self.checkpoints.steps():
            self.step(model, step, tokens, final=True)
        self._decided.discard(step)
        if write:
            self._write(model, self._revision(step, tokens))
        self.checkpoints.record(step, tokens)

    # -- resumption
    def state_dict(self) -> dict:
        """JSON state at a save (nothing pending then): schedule, detector, saved checkpoints."""
        return {"schedule": self.schedule.state_dict(), "revisions": [dict(r) for r in self.checkpoints.revisions]}

    def load_state_dict(self, state: dict, step: int, delete_later: bool = True) -> None:
        """Resume at ``step`` from :meth:`state_dict` taken there."""
        self.schedule.load_state_dict(state["schedule"])
        self.checkpoints.restore(state["revisions"], int(step), delete_later=delete_later)
        self._held = self._pending = None

    def status(self) -> str:
        """A short progress line: the last counts, the checkpoints saved, the mode."""
        counts = " ".join(f"{c[:3]}={v:.0f}" for c, v in (self.last.counts.items() if self.last else ()))
        mode = "dense" if self.schedule.dense else ("failing" if self.schedule.failing else "watch")
        return f"{counts} saved={len(self.checkpoints.revisions)} {mode}".strip()

    # -- internals
    def _revision(self, step: int, tokens: int) -> Revision:
        return Revision(int(tokens), int(step), self.checkpoints.name(step))

    def _known(self) -> List[Revision]:
        return sorted(Revision(int(r["tokens"]), int(r["step"]), r["name"]) for r in self.checkpoints.revisions)

    def _screen_and_decide(self, model, step: int, tokens: int, force_save: bool) -> bool:
        revision = self._revision(step, tokens)
        record, obs = self._screen(model, revision)
        decision = self.schedule.observe(step, obs)
        if force_save and not decision.save:
            decision = Decision(True, decision.save_previous, decision.reason or "final")
        if decision.save_previous and self._held is not None:
            held_revision, state, config = self._held
            self._write(model, held_revision, state, config)
            if self._pending is not None:
                self._pending.known = self._known()
        self._flush_pending()
        if decision.save:
            return self._save_current(model, revision, record)
        self._pending = record
        if self.cfg.live.lookback and record is not None:
            self._held = (revision, {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
                          copy.deepcopy(model.config))
        return False

    def _save_current(self, model, revision: Revision, record: Optional[LiveRecord]) -> bool:
        """Save (or, with ``writes_current=False``, leave to the caller) the checkpoint of this screen."""
        if self.checkpoints.writes_current:
            self._write(model, revision)
        else:
            self._decided.add(revision.step)
        self.schedule.last_saved = max(revision.step, self.schedule.last_saved or 0)
        if record is not None:
            record.known = sorted(set(self._known()) | {revision})
            self.writer.submit(record)
        self._pending = self._held = None
        self.writer.retry()
        return True

    def _write(self, model, revision: Revision, state=None, config=None) -> None:
        try:
            self.checkpoints.write(model, revision.step, revision.tokens, state_dict=state, config=config)
        except Exception as exc:  # noqa: BLE001  (a full disk must stop training loudly, not silently)
            raise RuntimeError(f"live: cannot save the checkpoint {revision.name} into "
                               f"{self.checkpoints.folder}: {exc}") from exc

    def _flush_pending(self) -> None:
        if self._pending is not None:
            self._pending.known = self._known()
            self.writer.submit(self._pending)
            self._pending = None
        self._held = None

    def _screen(self, model, revision: Revision):
        """(record, observation) of a screen of ``model`` now; (None, None) when it failed (reported once)."""
        tic = time.perf_counter()
        try:
            self._prepare(model)
            result = screen_in_training(model, self.adapter, self.probe, self.cfg.screen)
        except Exception as exc:  # noqa: BLE001  (never into the training loop)
            self.failures += 1
            if not self._screen_failed_reported:
                self._screen_failed_reported = True
                report(f"the screen at {revision.name} failed ({type(exc).__name__}: "
                         f"{first_line(str(exc))}); training and saving go on, "
                         "and the screen is tried again at the next save")
            return None, None
        seconds = time.perf_counter() - tic
        self.screens += 1
        self.screen_seconds += seconds
        metrics = result.metrics
        obs = Observation(revision.step, {c: float(metrics[count_metric(c)]) for c in self.cfg.live.classes
                                          if count_metric(c) in metrics}, metrics.get(INDUCTION_LOSS_METRIC))
        self.last = obs
        weight = next(model.parameters())
        extra = {PROBE_PARAM: self.probe.description, "dtype": str(weight.dtype).replace("torch.", ""),
                 "device": str(weight.device), "source": f"live: {self.checkpoints.folder}",
                 "batch_size": str(self.probe.batch_size)}
        return LiveRecord(revision, [], result, self._shape, extra, seconds), obs

    def _prepare(self, model) -> None:
        """The probe and the adapter, built at the first screen (the model's config is known then)."""
        if self.probe is not None:
            return
        adapter = adapter_for(model)
        probe = build_probe(self.cfg.corpus, model.config, self.tokenizer)
        probe.batch_size = min(int(self.cfg.corpus.batch_size), probe.n_sequences)
        self._shape = SimpleNamespace(n_layers=adapter.n_layers, n_heads=adapter.n_heads, head_dim=adapter.head_dim)
        self.adapter, self.probe = adapter, probe
