"""Causal group ablation (METHODS section 7).

A group of heads is ablated by replacing their slices of the output-projection input (a
forward pre-hook, :mod:`emergence.screens.head_ablation`; head masking is gone from
transformers 5) by zero or by their mean over the probe (per position). The effect is the
rise of the probe's induction loss over the clean model. Control: R random groups of the
same size drawn from the other heads less the ``exclude``d ones (the screen excludes the
heads flagged previous-token by default, see ``AblationConfig.control_exclude``); the
empirical p-value is (1 + #{controls with effect >= the group's}) / (R + 1). Every hook is
removed when a pass ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from emergence import EmergenceError
from emergence.screens.base import run_pass
from emergence.screens.continuous import InductionLossReducer
from emergence.screens.head_ablation import Head, HeadMeanReducer
from emergence.screens.prefix import run_ablations


@dataclass
class AblationResult:
    group: List[Head]
    loss_clean: float
    accuracy_clean: float
    loss_group: float
    accuracy_group: float
    control_effects: np.ndarray
    #: Heads the controls were drawn from (all heads less the group and the excluded ones).
    pool_size: int

    @property
    def effect(self) -> float:
        return self.loss_group - self.loss_clean

    @property
    def p_value(self) -> float:
        return empirical_p(self.control_effects, self.effect)

    def metrics(self) -> Dict[str, float]:
        c = self.control_effects
        return {
            "ablation.group_size": float(len(self.group)),
            "ablation.loss_clean": self.loss_clean, "ablation.accuracy_clean": self.accuracy_clean,
            "ablation.loss_group": self.loss_group, "ablation.accuracy_group": self.accuracy_group,
            "ablation.effect": self.effect,
            **control_summary(c),
            "ablation.controls": float(len(c)),
            "ablation.control_pool": float(self.pool_size),
            "ablation.p_value": self.p_value,
        }


def empirical_p(control_effects: np.ndarray, effect: float) -> float:
    """(1 + #{controls with effect >= ``effect``}) / (R + 1); NaN without controls."""
    R = len(control_effects)
    return float((1 + np.sum(control_effects >= effect)) / (R + 1)) if R else float("nan")


def control_summary(c: np.ndarray) -> Dict[str, float]:
    """``ablation.control_mean``, ``_std`` and ``_max`` of the control effects ``c`` (NaN when too few)."""
    nan = float("nan")
    return {"ablation.control_mean": float(c.mean()) if len(c) else nan,
            "ablation.control_std": float(c.std(ddof=1)) if len(c) > 1 else nan,
            "ablation.control_max": float(c.max()) if len(c) else nan}


def clean_pass(model, adapter, probe, loss_reducer, clean, means, want_means: bool):
    """(clean metrics, head means) over ``probe``: ``clean`` and ``means`` as given where the screen's
    pass measured them, else from one pass here (``loss_reducer``'s ``first()``; the means when
    ``want_means``)."""
    if clean is not None and not want_means:
        return clean, means
    reducers = [loss_reducer()] + ([HeadMeanReducer()] if want_means else [])
    run_pass(model, adapter, probe, reducers, progress=False)
    return (reducers[0].first() if clean is None else clean), (reducers[1].means if want_means else means)


def group_ablation(model, adapter, probe, group: Sequence[Head], mode: str = "mean", controls: int = 20,
                   seed: int = 0, progress: bool = True, exclude: Sequence[Head] = (),
                   clean: Optional[Tuple[float, float]] = None,
                   means: Optional[Dict[int, torch.Tensor]] = None) -> AblationResult:
    """Ablate ``group`` and ``controls`` random groups of the same size drawn from the
    heads outside ``group`` and ``exclude`` (METHODS section 7: ``exclude`` empty).

    ``clean`` (induction loss, accuracy over ``probe``) and ``means`` (per-position head
    means over ``probe``, for ``mode="mean"``) when the screen's own pass measured them;
    else they are measured here (one pass for both, :func:`clean_pass`). The ablated passes share
    each batch's clean prefix (:func:`emergence.screens.prefix.run_ablations`)."""
    clean, means = clean_pass(model, adapter, probe, InductionLossReducer, clean, means,
                              mode == "mean" and means is None)
    group = [tuple(h) for h in group]
    left_out = set(group) | {tuple(h) for h in exclude}
    others = [(l, h) for l in range(adapter.n_layers) for h in range(adapter.n_heads) if (l, h) not in left_out]
    if not group:  # nothing ablated: the clean model
        return AblationResult([], clean[0], clean[1], clean[0], clean[1], np.array([]), pool_size=len(others))
    rng = np.random.default_rng(seed)
    control_sets = []
    if len(others) >= len(group):
        control_sets = [[others[i] for i in rng.choice(len(others), size=len(group), replace=False)]
                        for _ in range(controls)]
    parts = run_ablations(model, adapter, probe, [group] + control_sets, InductionLossReducer, mode, means,
                          progress, "ablation controls")
    losses = [(p.metrics["induction_loss"], p.metrics["induction_accuracy"]) for p in parts]
    effects = np.array([loss - clean[0] for loss, _ in losses[1:]])
    return AblationResult(list(group), clean[0], clean[1], losses[0][0], losses[0][1], effects,
                          pool_size=len(others))


def parse_heads(names: Sequence[str]) -> List[Head]:
    heads = []
    for name in names:
        try:
            layer, head = (int(x) for x in str(name).split("."))
        except ValueError:
            raise EmergenceError(f"bad head {name!r} in screen.ablation.heads; write heads as 'layer.head', "
                                 "e.g. '3.1'") from None
        heads.append((layer, head))
    return heads


def check_heads(cfg, limits=None) -> None:
    """Refuse ``screen.ablation`` heads before any model is loaded: a malformed name, or (when
    ``limits``, an :class:`emergence.sources.ModelLimits`, knows the model's shape) a head the
    model does not have (``group: list`` without heads: emergence/config.py ``check_ablation``)."""
    heads = parse_heads(cfg.heads)
    layers, per_layer = getattr(limits, "layers", None), getattr(limits, "heads", None)
    if layers and per_layer:
        for layer, head in heads:
            if not (0 <= layer < layers and 0 <= head < per_layer):
                raise EmergenceError(f"screen.ablation.heads has {layer}.{head}, not a head of {limits.model}; "
                                     f"valid: layers 0-{layers - 1}, heads 0-{per_layer - 1}")
