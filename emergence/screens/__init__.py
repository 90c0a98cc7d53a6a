"""Head screens: a streaming pass of per-layer reducers, then classification.

``screen()`` is the one entry point: the recipe ``screen.recipe`` names
(:data:`emergence.config.SCREEN_RECIPES`: ``project`` or ``xu2026``) builds the
reducers, they run in one forward pass over the probe, and the per-head table and
whole-model metrics come back (with the recipe's group ablation when configured).

Every registered head class (:mod:`emergence.common.head_classes`) is computed, flagged and
counted in every run; ``screen.classes`` only chooses what is printed, and is logged
as a param. A class without a ``screen.thresholds`` entry uses its registry default.
The screen config is checked against its schema first (emergence/config.py ``check_screen``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Dict

import numpy as np
import pandas as pd

from emergence.config import check_screen
from emergence.common.contract import LOGGED_CLASSES_PARAM, PR_INDUCTION_MEAN_METRIC, selectivity_column
from emergence.loading import matmul_precision
from emergence.screens.base import Reducer, ScreenPart, run_pass
from emergence.screens.classify import all_thresholds, class_metrics, computed_classes, head_table
from emergence.screens.recipes import flagged, recipe_for

__all__ = ["Reducer", "ScreenPart", "ScreenResult", "run_pass", "screen", "flagged", "recipe_for"]


@dataclass
class ScreenResult:
    heads: pd.DataFrame
    metrics: Dict[str, float]
    #: Run params the recipe adds (``screen.pr_definition``).
    params: Dict[str, str] = field(default_factory=dict)


def screen(model, adapter, probe, screen_cfg, progress: bool = True, description: str = "screen",
           precision: str = "float32") -> ScreenResult:
    """Screen ``model`` on ``probe`` with the ``screen`` config: the per-head table (every
    registered class's selectivity and flag, the primary class) and the run's metrics.
    ``precision``: ``tf32`` or ``float32``, the matmul precision of every pass
    (:func:`emergence.loading.matmul_precision`; a loaded model's ``matmul_precision``)."""
    with matmul_precision(precision):
        check_screen(screen_cfg)  # the screen group's schema (emergence/config.py)
        thresholds = all_thresholds(screen_cfg.thresholds)
        recipe = recipe_for(screen_cfg)
        reducers = recipe.reducers(screen_cfg)
        parts = run_pass(model, adapter, probe, reducers, progress=progress, description=description)
        heads, metrics = {}, {}
        for part in parts:
            heads.update(part.heads)
            metrics.update(part.metrics)
        table = head_table(heads, thresholds)
        metrics.update(class_metrics(table, adapter.n_layers))
        induction = heads[selectivity_column("induction")] >= thresholds["induction"]
        if "pr" in heads and induction.any():
            metrics[PR_INDUCTION_MEAN_METRIC] = float(np.nanmean(heads["pr"][induction]))
        if screen_cfg.ablation is not None:
            tic = time.perf_counter()
            metrics.update(recipe.ablate(model, adapter, probe, heads, thresholds, screen_cfg.ablation, progress,
                                         screened=reducers))
            metrics["ablation_seconds"] = time.perf_counter() - tic
        params = recipe.params(screen_cfg)
        params[LOGGED_CLASSES_PARAM] = json.dumps(computed_classes(heads))
    return ScreenResult(table, metrics, params)
