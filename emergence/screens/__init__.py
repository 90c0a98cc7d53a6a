"""Head screens: a streaming pass of per-layer reducers, then classification.

``screen()`` is the one entry point: it builds the reducers a screen config asks for,
runs them in one forward pass over the probe, and returns the per-head table and
whole-model metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

import numpy as np
import pandas as pd

from emergence import EmergenceError
from emergence.config import HEAD_CLASSES
from emergence.probes import Probe

from emergence.screens.base import Reducer, ScreenPart, run_pass
from emergence.screens.classify import check_screen, class_metrics, head_table
from emergence.screens.ablation import group_ablation, parse_heads
from emergence.screens.continuous import InductionLossReducer
from emergence.screens.participation import ParticipationRatioReducer
from emergence.screens.selectivity import SelectivityReducer

__all__ = ["Reducer", "ScreenPart", "ScreenResult", "run_pass", "screen", "check_screen", "build_reducers"]


@dataclass
class ScreenResult:
    heads: pd.DataFrame
    metrics: Dict[str, float]


def build_reducers(screen_cfg) -> List[Reducer]:
    reducers: List[Reducer] = [SelectivityReducer(screen_cfg.local_window), InductionLossReducer()]
    if screen_cfg.participation_ratio:
        reducers.append(ParticipationRatioReducer(screen_cfg.pr.samples, screen_cfg.pr.seed))
    return reducers


def check_ablation(cfg) -> None:
    """Refuse a bad ``screen.ablation`` before any forward pass is spent."""
    if cfg.group not in ("induction", "list"):
        raise EmergenceError(f"unknown ablation group {cfg.group!r}; valid: induction, list")
    unknown = [c for c in cfg.control_exclude if c not in HEAD_CLASSES]
    if unknown:
        raise EmergenceError(f"unknown head class {unknown[0]!r} in screen.ablation.control_exclude; "
                             f"valid: {', '.join(HEAD_CLASSES)}")


def flagged(heads, thresholds, klass: str) -> List[tuple]:
    """(layer, head) of every head whose ``klass`` selectivity reaches its threshold."""
    return [tuple(int(i) for i in ix) for ix in np.argwhere(heads[f"selectivity.{klass}"] >= thresholds[klass])]


def screen(model, adapter, probe, screen_cfg, progress: bool = True, description: str = "screen") -> ScreenResult:
    classes = list(screen_cfg.classes)
    thresholds = {k: float(v) for k, v in screen_cfg.thresholds.items()}
    check_screen(classes, thresholds)
    if screen_cfg.ablation is not None:
        check_ablation(screen_cfg.ablation)
    parts = run_pass(model, adapter, probe, build_reducers(screen_cfg), progress=progress,
                     description=description)
    heads, metrics = {}, {}
    for part in parts:
        heads.update(part.heads)
        metrics.update(part.metrics)
    table = head_table(heads, classes, thresholds)
    metrics.update(class_metrics(table, classes, adapter.n_layers))
    induction = heads["selectivity.induction"] >= thresholds["induction"]
    if "pr" in heads and induction.any():
        metrics["pr.induction_mean"] = float(np.nanmean(heads["pr"][induction]))
    if screen_cfg.ablation is not None:
        cfg = screen_cfg.ablation
        group = flagged(heads, thresholds, "induction") if cfg.group == "induction" else parse_heads(cfg.heads)
        exclude = sorted({h for c in cfg.control_exclude for h in flagged(heads, thresholds, c)})
        subset = Probe(probe.input_ids[: cfg.n_sequences], probe.kind, probe.first_token, probe.batch_size,
                       probe.description + f" (first {cfg.n_sequences} for ablation)")
        ablation = group_ablation(model, adapter, subset, group, cfg.mode, cfg.controls, cfg.seed, progress,
                                  exclude=exclude)
        metrics.update(ablation.metrics())
    return ScreenResult(table, metrics)
