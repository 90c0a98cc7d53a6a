"""The reference study's group ablation (its ``*_ablation.py`` and matched-random scripts).

The group (by default the heads at >= 50x induction: the study's "induction screen")
is ablated by zeroing its slices of the output-projection input (a forward pre-hook,
:func:`emergence.screens.ablation.ablated`). Metrics at the last position q = T-1
against B, over the probe's first ``n`` sequences (the study: all 2,000): loss
(cross-entropy), top-1 and top-5 accuracy, mean logit of B.

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
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from emergence.screens.ablation import HeadMeanReducer, ablated
from emergence.screens.base import run_pass
from emergence.screens.xu2026 import LastPositionLossReducer

Head = Tuple[int, int]
METRICS = ("loss", "top1", "top5", "logit_b")


def by_layer(heads: Sequence[Head]) -> Dict[int, List[int]]:
    out: Dict[int, List[int]] = {}
    for layer, head in sorted(set(map(tuple, heads))):
        out.setdefault(int(layer), []).append(int(head))
    return out


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
        c = self.control_effects
        return float((1 + np.sum(c >= self.effect)) / (len(c) + 1)) if len(c) else float("nan")

    def metrics(self) -> Dict[str, float]:
        c = self.control_effects
        nan = float("nan")
        m = {"ablation.group_size": float(len(self.group)), "ablation.effect": self.effect,
             "ablation.controls": float(len(c)),
             "ablation.control_size": float(np.mean([len(s) for s in self.control_sets])) if self.control_sets else nan,
             "ablation.control_mean": float(c.mean()) if len(c) else nan,
             "ablation.control_std": float(c.std(ddof=1)) if len(c) > 1 else nan,
             "ablation.control_max": float(c.max()) if len(c) else nan,
             "ablation.p_value": self.p_value,
             "ablation.upper_bound_size": float(self.upper_size),
             "ablation.effect_upper_bound": (self.upper["loss"] - self.clean["loss"]) if self.upper else nan}
        for k in METRICS:
            m[f"ablation.{k}_clean"] = self.clean[k]
            m[f"ablation.{k}_group"] = self.ablated[k]
            m[f"ablation.{k}_upper_bound"] = self.upper[k] if self.upper else nan
            m[f"ablation.{k}_control_mean"] = float(np.mean([x[k] for x in self.controls])) if self.controls else nan
        # The project's names for the same two numbers, so reports read either recipe.
        m["ablation.loss_clean"], m["ablation.accuracy_clean"] = self.clean["loss"], self.clean["top1"]
        m["ablation.loss_group"], m["ablation.accuracy_group"] = self.ablated["loss"], self.ablated["top1"]
        return m


def last_position_metrics(model, adapter, probe) -> Dict[str, float]:
    (part,) = run_pass(model, adapter, probe, [LastPositionLossReducer()], progress=False)
    m = part.metrics
    return {"loss": m["induction_loss"], "top1": m["induction_accuracy"], "top5": m["induction_top5"],
            "logit_b": m["induction_logit_b"]}


def matched_ablation(model, adapter, probe, group: Sequence[Head], mode: str = "zero", controls: int = 10,
                     seed: int = 0, exclude: Sequence[Head] = (), progress: bool = True) -> MatchedAblationResult:
    """Clean, group, matched controls and whole-layer upper bound, at the last position."""
    from tqdm.auto import tqdm

    group = sorted({tuple(int(i) for i in h) for h in group})
    means = None
    if mode == "mean" and group:
        reducer = HeadMeanReducer()
        run_pass(model, adapter, probe, [reducer], progress=False)
        means = reducer.means
    clean = last_position_metrics(model, adapter, probe)
    if not group:
        return MatchedAblationResult([], clean, dict(clean))
    with ablated(adapter, group, mode, means):
        hit = last_position_metrics(model, adapter, probe)
    sets = matched_controls(group, adapter.n_heads, controls, seed, exclude)
    results = []
    for heads in tqdm(sets, desc="matched controls", leave=False, disable=not progress):
        with ablated(adapter, heads, mode, means):
            results.append(last_position_metrics(model, adapter, probe))
    bound = upper_bound(group, adapter.n_heads)
    with ablated(adapter, bound, mode, means):
        upper = last_position_metrics(model, adapter, probe)
    return MatchedAblationResult(group, clean, hit, results, sets, upper, len(bound))
