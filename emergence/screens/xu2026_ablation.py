"""The reference study's group ablation (its ``*_ablation.py`` and matched-random scripts).

The group (by default the heads at >= 50x induction: the study's "induction screen")
is ablated by zeroing its slices of the output-projection input
(:func:`emergence.screens.head_ablation.ablated`). The clean metrics are the screen's own pass's
(its :class:`~emergence.screens.xu2026.LastPositionLossReducer`, over the same sequences),
and the ablated passes share each batch's clean prefix below the group's first layer
(:mod:`emergence.screens.prefix`): 12 suffixes a batch instead of 13 full passes. Metrics at the
last position q = T-1 against B, over the probe's first ``n`` sequences (the study: all 2,000):
loss (cross-entropy), top-1 and top-5 accuracy, mean logit of B.

Controls are matched per layer: control r draws, with ``RandomState(seed + r)`` and for
each of the group's layers in ascending order, ``min(k_L, |E_L|)`` heads without
replacement from E_L, that layer's heads outside the group (and outside ``exclude``),
where k_L is the group's count in that layer (the study's ``matched_random_sweep``:
seeds 0..9). The upper bound ablates every head of the group's layers. Effect = loss
rise over the clean model; p = (1 + #{controls with effect >= the group's}) / (R + 1).
An empty group runs no ablation pass (effect 0, no controls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from emergence.screens.ablation import clean_pass, control_summary, empirical_p
from emergence.screens.head_ablation import Head, by_layer
from emergence.screens.prefix import run_ablations
from emergence.screens.xu2026 import LAST_POSITION_METRICS, LastPositionLossReducer


def matched_controls(group: Sequence[Head], n_heads: int, controls: int, seed: int = 0,
                     exclude: Sequence[Head] = ()) -> List[List[Head]]:
    """``controls`` head sets matched to ``group`` per layer (see the module docstring)."""
    layers = by_layer(group)
    excluded = {tuple(h) for h in exclude}
    out = []
    for r in range(controls):
        rng = np.random.RandomState(seed + r)
        pick: List[Head] = []
        for layer, heads in layers.items():
            eligible = [h for h in range(n_heads) if h not in heads and (layer, h) not in excluded]
            n = min(len(heads), len(eligible))
            if n:
                pick += [(layer, int(h)) for h in sorted(rng.choice(eligible, size=n, replace=False).tolist())]
        out.append(pick)
    return out


def upper_bound(group: Sequence[Head], n_heads: int) -> List[Head]:
    """Every head of the group's layers."""
    return [(layer, h) for layer in by_layer(group) for h in range(n_heads)]


@dataclass
class MatchedAblationResult:
    group: List[Head]
    clean: Dict[str, float]
    ablated: Dict[str, float]
    controls: List[Dict[str, float]] = field(default_factory=list)
    control_sets: List[List[Head]] = field(default_factory=list)
    upper: Optional[Dict[str, float]] = None
    upper_size: int = 0

    @property
    def effect(self) -> float:
        return self.ablated["loss"] - self.clean["loss"]

    @property
    def control_effects(self) -> np.ndarray:
        return np.array([c["loss"] - self.clean["loss"] for c in self.controls])

    @property
    def p_value(self) -> float:
        return empirical_p(self.control_effects, self.effect)

    def metrics(self) -> Dict[str, float]:
        c = self.control_effects
        nan = float("nan")
        m = {"ablation.group_size": float(len(self.group)), "ablation.effect": self.effect,
             "ablation.controls": float(len(c)),
             "ablation.control_size": float(np.mean([len(s) for s in self.control_sets])) if self.control_sets else nan,
             **control_summary(c),
             "ablation.p_value": self.p_value,
             "ablation.upper_bound_size": float(self.upper_size),
             "ablation.effect_upper_bound": (self.upper["loss"] - self.clean["loss"]) if self.upper else nan}
        for k in LAST_POSITION_METRICS:
            m[f"ablation.{k}_clean"] = self.clean[k]
            m[f"ablation.{k}_group"] = self.ablated[k]
            m[f"ablation.{k}_upper_bound"] = self.upper[k] if self.upper else nan
            m[f"ablation.{k}_control_mean"] = float(np.mean([x[k] for x in self.controls])) if self.controls else nan
        # The project's names for the same two numbers, so reports read either recipe.
        m["ablation.loss_clean"], m["ablation.accuracy_clean"] = self.clean["loss"], self.clean["top1"]
        m["ablation.loss_group"], m["ablation.accuracy_group"] = self.ablated["loss"], self.ablated["top1"]
        return m


def matched_ablation(model, adapter, probe, group: Sequence[Head], mode: str = "zero", controls: int = 10,
                     seed: int = 0, exclude: Sequence[Head] = (), progress: bool = True,
                     clean: Optional[Dict[str, float]] = None,
                     means: Optional[dict] = None) -> MatchedAblationResult:
    """Clean, group, matched controls and whole-layer upper bound, at the last position.

    ``clean`` (the metrics of :data:`~emergence.screens.xu2026.LAST_POSITION_METRICS` over
    ``probe``) and ``means`` (per-position head means, for ``mode="mean"``) when the screen's own
    pass measured them; else they are measured here (one pass for both,
    :func:`~emergence.screens.ablation.clean_pass`). The group, the controls and the bound share
    each batch's clean prefix below the group's first layer (:func:`emergence.screens.prefix.run_ablations`)."""
    group = sorted({tuple(int(i) for i in h) for h in group})
    clean, means = clean_pass(model, adapter, probe, LastPositionLossReducer, clean, means,
                              mode == "mean" and bool(group) and means is None)
    if not group:
        return MatchedAblationResult([], clean, dict(clean))
    sets = matched_controls(group, adapter.n_heads, controls, seed, exclude)
    bound = upper_bound(group, adapter.n_heads)
    parts = run_ablations(model, adapter, probe, [group, *sets, bound], LastPositionLossReducer, mode, means,
                          progress, "matched ablation")
    got = [{k: part.metrics[name] for k, name in LAST_POSITION_METRICS.items()} for part in parts]
    return MatchedAblationResult(group, clean, got[0], got[1:-1], sets, got[-1], len(bound))
