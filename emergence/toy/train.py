"""Training the toy suite on the CPU, with log-spaced checkpoints as ordinary HF folders.

Layout of one suite member, ``<cache_dir>/<name>-<hash>/`` (``hash``: the first 10
hex digits of the SHA-256 of the normalised recipe and ``TRAINER_VERSION``)::

    step0/            config.json + model.safetensors (+ generation_config.json)
    step25/ ...       one HF model folder per revision of ``checkpoint_schedule``
    revisions.json    {"revisions": [{"name", "step", "tokens"}...], "recipe": {...},
                       "complete": true}   -- written last, atomically
    train_state.pt    while training only: resume state of the last complete checkpoint
    .lock             an advisory lock held while training

Crash safety. Each file and checkpoint is written under a ``.tmp-*`` name and renamed into
place; ``revisions.json``, the only mark of a finished suite, is written last. A folder
without a complete ``revisions.json`` listing every revision of the schedule, each with
its config and weights, is never taken for a finished suite, whatever else it holds.

Resumption. After each checkpoint (once its folder is in place) the trainer writes
``train_state.pt``: model and AdamW state, the step, torch's RNG state. An interrupted
training resumes from it on the next ``ensure_trained``: the learning rate is a pure
function of the step and the data a pure function of (seed, step)
(``emergence.toy.corpus``), so it yields the weights of an uninterrupted one on the same
machine (tested). Checkpoints newer than the state and ``.tmp-*`` leftovers are redone;
without a usable state training restarts from step 0 in a cleared folder.

Live screening (``live=adaptive``, emergence/live/toy.py): with ``monitor=...`` the monitor,
called after every update, decides and writes the checkpoints instead of the fixed schedule
(its state is kept in ``train_state.pt``); the weights are those of the fixed-schedule
training (tested bit for bit).

Determinism: ``torch.manual_seed(init seed)`` before building the model (the data come from
the data seed, ``emergence.toy.recipe``), ``torch.use_deterministic_algorithms(True)``,
numpy Generators for the data, the thread count fixed by ``recipe.threads`` (``null``:
torch's default). Same recipe, machine and thread count: bitwise-equal weights. Training
runs on the CPU with SDPA attention; no dropout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import shutil
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from emergence import EmergenceError, OutputError
from emergence.common.atomic import tmp_name, write_atomic
from emergence.common.progress import bars_disabled, quiet_hf_bars, stage_line
from emergence.toy.corpus import ToyCorpus, check_training_corpus
from emergence.toy.models import build_model, check_recipe
from emergence.toy.recipe import ToyRecipeConfig, data_seed

#: Bump when a change to the trainer changes the weights a recipe gives (new cache folder).
TRAINER_VERSION = 1
REVISIONS_FILE = "revisions.json"
STATE_FILE = "train_state.pt"
LR_SCHEDULES = ("constant", "cosine")


def as_recipe(recipe) -> ToyRecipeConfig:
    """A ``ToyRecipeConfig`` from a dataclass, an OmegaConf node or a (partial) dict;
    missing keys take the dataclass defaults, unknown keys are refused."""
    if isinstance(recipe, ToyRecipeConfig):
        node = OmegaConf.structured(recipe)
    else:
        if recipe is None:
            raise EmergenceError("the model has no recipe (model.recipe is null); a toy model needs one, "
                                 "e.g. defaults: [/recipe@recipe: neox]")
        try:
            node = OmegaConf.merge(OmegaConf.structured(ToyRecipeConfig),
                                   recipe if isinstance(recipe, DictConfig) else OmegaConf.create(recipe))
        except Exception as exc:  # omegaconf's key/type errors name the key
            raise EmergenceError(f"bad toy recipe: {exc}") from None
    rec = OmegaConf.to_object(node)
    check_recipe(rec)
    check_training_corpus(rec.corpus, rec.seq_len)
    if rec.lr_schedule not in LR_SCHEDULES:
        raise EmergenceError(f"recipe.lr_schedule={rec.lr_schedule!r} is unknown; valid: {', '.join(LR_SCHEDULES)}")
    return rec


def recipe_hash(recipe) -> str:
    """Short hash of the normalised recipe (and the trainer version): the cache key. ``data_seed`` /
    ``init_seed`` are left out while null (added later: a recipe without them keeps its cached suite)."""
    normalised = dataclasses.asdict(as_recipe(recipe))
    for key in ("data_seed", "init_seed"):
        if normalised[key] is None:
            del normalised[key]
    text = json.dumps({"recipe": normalised, "trainer_version": TRAINER_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def suite_folder(recipe, cache_dir, name: str) -> Path:
    return Path(cache_dir) / f"{name}-{recipe_hash(recipe)}"


def checkpoint_schedule(recipe) -> List[Dict]:
    """The suite's revisions, known before training: step 0, then ``n_checkpoints``
    log-spaced integer steps from ``first_checkpoint`` to ``steps`` (deduplicated, so
    possibly fewer), each ``{"name": "step<N>", "step": N, "tokens": N * batch * seq_len}``."""
    rec = as_recipe(recipe)
    logs = np.geomspace(rec.first_checkpoint, rec.steps, rec.n_checkpoints)
    per_step = int(rec.batch_size) * int(rec.seq_len)
    return [{"name": f"step{s}", "step": s, "tokens": s * per_step}
            for s in sorted({0, int(rec.steps)} | {int(round(s)) for s in logs})]


def lr_at(recipe: ToyRecipeConfig, step: int) -> float:
    """Learning rate of update ``step`` (0-based): linear warm-up, then constant or cosine."""
    lr = float(recipe.lr)
    if recipe.warmup_steps > 0 and step < recipe.warmup_steps:
        return lr * (step + 1) / recipe.warmup_steps
    if recipe.lr_schedule == "constant":
        return lr
    span = max(1, recipe.steps - recipe.warmup_steps)
    progress = min(1.0, (step - recipe.warmup_steps) / span)
    floor = lr * float(recipe.min_lr_ratio)
    return floor + (lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def is_complete(folder: Path, recipe=None, digest: Optional[str] = None) -> bool:
    """True only for a finished suite: ``revisions.json`` marked complete (made for ``digest``, when
    given), listing the recipe's schedule (when given), every revision folder with config and weights."""
    folder = Path(folder)
    try:
        data = json.loads((folder / REVISIONS_FILE).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("complete") is not True:
        return False
    if digest is not None and data.get("recipe_hash") != digest:
        return False
    revisions = data.get("revisions") or []
    if recipe is not None and revisions != checkpoint_schedule(recipe):
        return False
    return bool(revisions) and all((folder / r["name"] / "config.json").is_file()
                                   and (folder / r["name"] / "model.safetensors").is_file() for r in revisions)


def _write_toy_checkpoint(path: Path, write: Callable[[Path], None]) -> None:
    """:func:`~emergence.common.atomic.write_atomic` (a folder left by a run that died after its
    rename, before its resume state, is replaced), where a failure removes the partial write and says
    in one line what could not be written and why (a full disk makes ``torch.save`` raise a
    RuntimeError of its own, hence the free space)."""
    tmp = tmp_name(path)
    try:
        write_atomic(path, write)
    except Exception as exc:  # noqa: BLE001  (a full disk, a read-only folder: one line, nothing partial left)
        shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
        cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).strip().splitlines()[0][:200]
        try:
            free = f"; {shutil.disk_usage(path.parent).free / 2**20:.1f} MiB free there"
        except OSError:
            free = ""
        raise OutputError(f"cannot write the toy checkpoint {str(path)!r} (cache.toy_dir): {cause}{free}; free "
                          "some space or set cache.toy_dir=DIR, then rerun (training resumes from its last whole "
                          "checkpoint)") from exc


@contextlib.contextmanager
def _locked(folder: Path):
    """Hold an advisory lock on the suite folder (POSIX; a no-op where fcntl is missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(folder / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:  # released here, not at close: a process forked meanwhile shares the open file
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _training_context(threads: Optional[int]):
    prev_threads = torch.get_num_threads()
    prev_det = torch.are_deterministic_algorithms_enabled()
    prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    if threads:
        torch.set_num_threads(int(threads))
    torch.use_deterministic_algorithms(True)
    try:
        with quiet_hf_bars():
            yield
    finally:
        torch.use_deterministic_algorithms(prev_det, warn_only=prev_warn)
        torch.set_num_threads(prev_threads)


def _optimizer(model: torch.nn.Module, rec: ToyRecipeConfig) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": float(rec.weight_decay)},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=float(rec.lr), betas=(float(rec.beta1), float(rec.beta2)))


def train_update(model, optimizer, rec: ToyRecipeConfig, corpus: ToyCorpus, step: int, extra: dict) -> float:
    """One optimizer update of training step ``step`` (0-based); its training loss."""
    batch = torch.from_numpy(corpus.batch(step))
    for group in optimizer.param_groups:
        group["lr"] = lr_at(rec, step)
    out = model(input_ids=batch, labels=batch, **extra)
    optimizer.zero_grad(set_to_none=True)
    out.loss.backward()
    if rec.grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(rec.grad_clip))
    optimizer.step()
    return float(out.loss.detach())


def _save_checkpoint(model, folder: Path, name: str) -> None:
    _write_toy_checkpoint(folder / name, model.save_pretrained)


def _save_state(folder: Path, step: int, model, optimizer, digest: str, losses: List[float],
                live: Optional[dict] = None) -> None:
    state = {"step": step, "recipe_hash": digest, "model": model.state_dict(),
             "optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state(), "losses": losses}
    if live is not None:  # the live monitor's state at this checkpoint (emergence/live/)
        state["live"] = live
    _write_toy_checkpoint(folder / STATE_FILE, lambda p: torch.save(state, p))


def _resume(folder: Path, digest: str, model, optimizer, save_at: Dict[int, str], monitor) -> Tuple[int, List[float]]:
    """(the step training starts at, the losses so far): from ``train_state.pt`` when it was made for
    ``digest`` (model, optimizer and torch's RNG restored; the checkpoints past it removed, to be
    redone; the monitor's state restored, its later checkpoints redone), else step 0 in a cleared folder."""
    try:
        state = torch.load(folder / STATE_FILE, map_location="cpu", weights_only=False)
    except Exception:  # missing, truncated or corrupt: restart cleanly
        state = None
    if not isinstance(state, dict) or state.get("recipe_hash") != digest:
        for child in folder.iterdir():
            if child.name != ".lock":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        return 0, []
    start = int(state["step"])
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    for step, rev_name in save_at.items():  # checkpoints past the state are redone
        if step > start and (folder / rev_name).exists():
            shutil.rmtree(folder / rev_name)
    if monitor is not None:  # the monitor's state there; its later checkpoints are redone
        monitor.load_state_dict(state["live"], start)
    return start, list(state.get("losses", []))


def train_suite(recipe, folder, name: str = "toy", progress: bool = True,
                on_step: Optional[Callable[[int], None]] = None, monitor=None, identity: str = "") -> Path:
    """Train ``recipe`` into ``folder`` (resuming from ``train_state.pt`` if usable); call through
    ``ensure_trained``, which holds the folder's lock. ``on_step(done)`` is called after each update
    (tests interrupt a training with it). ``monitor``: a live monitor (:class:`emergence.live.LiveMonitor`)
    writing into ``folder``, which decides the checkpoints instead of the fixed schedule; ``identity``
    (its settings) is added to the recipe hash that a resume state must match."""
    rec = as_recipe(recipe)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    digest = recipe_hash(rec) + identity
    schedule = checkpoint_schedule(rec)
    save_at = {} if monitor is not None else {r["step"]: r["name"] for r in schedule}
    per_step = int(rec.batch_size) * int(rec.seq_len)

    (folder / REVISIONS_FILE).unlink(missing_ok=True)  # not a finished suite until it is written again
    for child in folder.glob(".tmp-*"):
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    corpus = ToyCorpus(rec.corpus, rec.seq_len, rec.batch_size, data_seed(rec))
    t0 = time.perf_counter()
    with _training_context(rec.threads):
        model = build_model(rec, attn_implementation="sdpa").train()
        optimizer = _optimizer(model, rec)
        start, losses = _resume(folder, digest, model, optimizer, save_at, monitor)
        extra = {"output_router_logits": True} if rec.family == "olmoe" else {}
        stage_line(f"training {name}: {rec.steps} steps" + (f", resumed at step {start}" if start else "")
                   + f" ({len(schedule)} checkpoints)", progress)
        bar = tqdm(total=rec.steps, initial=start, desc=f"training {name}", unit="step",
                   disable=bars_disabled(progress), dynamic_ncols=True)
        try:
            if start == 0:
                _save_due(folder, 0, 0, False, model, optimizer, digest, losses, save_at, monitor)
            for step in range(start, rec.steps):
                losses.append(train_update(model, optimizer, rec, corpus, step, extra))
                done = step + 1
                bar.update(1)
                _save_due(folder, done, done * per_step, done == rec.steps, model, optimizer, digest, losses, save_at,
                          monitor)
                _report(bar, name, done, rec.steps, losses, monitor, progress)
                if on_step is not None:
                    on_step(done)
        finally:
            bar.close()
    seconds = time.perf_counter() - t0
    stage_line(f"training {name}: done in {seconds:.0f} s, loss {np.mean(losses[-25:]) if losses else float('nan'):.3f}",
               progress)
    if monitor is not None:
        monitor.finish()
        schedule = list(monitor.checkpoints.revisions)
    write_listing(folder, rec, schedule, digest, name, seconds, start, losses, monitor)
    (folder / STATE_FILE).unlink(missing_ok=True)
    return folder


def _save_due(folder: Path, step: int, tokens: int, final: bool, model, optimizer, digest: str, losses: List[float],
              save_at: Dict[int, str], monitor) -> None:
    """After update ``step``: the fixed schedule's checkpoint (with the resume state) where one is due,
    or the live monitor's decision (its state saved with the resume state where it saved one)."""
    if step in save_at:
        _save_checkpoint(model, folder, save_at[step])
        _save_state(folder, step, model, optimizer, digest, losses)
    if monitor is not None and monitor.step(model, step, tokens, final=final):
        _save_state(folder, step, model, optimizer, digest, losses, live=monitor.state_dict())


def _report(bar, name: str, done: int, steps: int, losses: List[float], monitor, progress: bool) -> None:
    """The training's progress after update ``done``: the bar's loss every 25 updates, a stage line
    at each quarter."""
    if done % 25 == 0 or done == steps:
        bar.set_postfix_str(f"loss={np.mean(losses[-25:]):.3f}" + (f" {monitor.status()}" if monitor is not None else ""))
    if done % max(1, steps // 4) == 0 and done < steps:
        stage_line(f"training {name}: step {done}/{steps}, loss {np.mean(losses[-25:]):.3f}", progress)


def write_listing(folder: Path, rec: ToyRecipeConfig, revisions: List[Dict], digest: str, name: str, seconds: float,
                  start: int, losses: List[float], monitor=None) -> None:
    """``revisions.json`` of a finished suite (the mark of a finished suite: written last, atomically)."""
    listing = {"revisions": revisions, "recipe": dataclasses.asdict(rec), "recipe_hash": digest,
               "trainer_version": TRAINER_VERSION, "name": name,
               "train": {"seconds_last_session": round(seconds, 2), "resumed_from_step": start,
                         "threads": rec.threads or torch.get_num_threads(),
                         "torch": torch.__version__, "final_loss": float(np.mean(losses[-50:])) if losses else None,
                         "loss_every_25": [round(float(np.mean(losses[i:i + 25])), 4)
                                           for i in range(0, len(losses), 25)]},
               "complete": True}
    if monitor is not None:
        listing.update(monitor.checkpoints.listing_extra)
        listing["live"] = {"screens_last_session": monitor.screens,
                           "screen_seconds_last_session": round(monitor.screen_seconds, 2),
                           "monitor_seconds_last_session": round(monitor.seconds, 2),
                           "failed_screens_last_session": monitor.failures}
    _write_toy_checkpoint(Path(folder) / REVISIONS_FILE, lambda p: p.write_text(json.dumps(listing, indent=1)))


def ensure_trained(recipe, cache_dir, name: str, progress: bool = True) -> Path:
    """The folder ``<cache_dir>/<name>-<hash>/`` of a fully trained suite member, trained first if
    missing (an interrupted training resumes from its last complete checkpoint)."""
    rec = as_recipe(recipe)
    folder = suite_folder(rec, cache_dir, name)
    if is_complete(folder, rec):
        return folder
    with _locked(folder):
        if not is_complete(folder, rec):  # another process may have finished it meanwhile
            train_suite(rec, folder, name, progress=progress)
    return folder
