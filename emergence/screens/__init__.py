"""Head screens: a streaming pass of per-layer reducers, then classification.

``screen()`` is the one entry point: the recipe ``screen.recipe`` names
(:data:`emergence.screens.recipes.RECIPES`: ``project`` or ``xu2026``) builds the
reducers, they run in one forward pass over the probe, and the per-head table and
whole-model metrics come back (with the recipe's group ablation when configured).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict

import numpy as np
import pandas as pd

from emergence.screens.base import Reducer, ScreenPart, run_pass
from emergence.screens.classify import check_screen, class_metrics, head_table
from emergence.screens.recipes import RECIPES, build_reducers, check_ablation, flagged, recipe_for

__all__ = ["Reducer", "ScreenPart", "ScreenResult", "run_pass", "screen", "check_screen", "build_reducers",
           "check_ablation", "flagged", "RECIPES", "recipe_for"]


@dataclass
class ScreenResult:
    heads: pd.DataFrame
    metrics: Dict[str, float]
    #: Run params the recipe adds (``screen.pr_definition``).
    params: Dict[str, str] = field(default_factory=dict)


def screen(model, adapter, probe, screen_cfg, progress: bool = True, description: str = "screen") -> ScreenResult:
    classes = list(screen_cfg.classes)
    thresholds = {k: float(v) for k, v in screen_cfg.thresholds.items()}
    check_screen(classes, thresholds)
    recipe = recipe_for(screen_cfg)
    recipe.check(screen_cfg)
    parts = run_pass(model, adapter, probe, recipe.reducers(screen_cfg), progress=progress,
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
        metrics.update(recipe.ablate(model, adapter, probe, heads, thresholds, screen_cfg.ablation, progress))
    return ScreenResult(table, metrics, recipe.params(screen_cfg))
