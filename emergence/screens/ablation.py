"""Causal group ablation (METHODS section 7).

A group of heads is ablated by replacing their slices of the output-projection
input (a forward pre-hook; head masking is gone from transformers 5) by zero or by
their mean over the probe (per position). The effect is the rise of the probe's
induction loss over the clean model. Control: R random groups of the same size drawn
from the other heads less the ``exclude``d ones (the screen excludes the heads flagged
previous-token by default, see ``AblationConfig.control_exclude``); the empirical
p-value is (1 + #{controls with effect >= the group's}) / (R + 1). Every hook is
removed when a pass ends.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from emergence import EmergenceError
from emergence.config import ABLATION_MODES
from emergence.screens.base import Reducer, ScreenPart, run_pass
from emergence.screens.continuous import InductionLossReducer

Head = Tuple[int, int]
MODES = ABLATION_MODES


class HeadMeanReducer(Reducer):
    """Mean of each head's output-projection input over the probe's sequences (its first
    ``limit`` ones when set), per position."""

    needs_head_outputs = True

    def __init__(self, limit: Optional[int] = None):
        self.limit = limit

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.sums: Dict[int, torch.Tensor] = {}
        self.count = 0
        self.take = 0

    def start_batch(self, input_ids: torch.Tensor) -> None:
        left = input_ids.shape[0] if self.limit is None else max(0, min(input_ids.shape[0], self.limit - self.count))
        self.take = left
        self.count += left

    def head_outputs(self, layer: int, z: torch.Tensor) -> None:
        if self.take == 0:
            return
        s = z[:self.take].sum(0, dtype=torch.float64)  # [T, H, d]
        self.sums[layer] = s if layer not in self.sums else self.sums[layer] + s

    def finish(self) -> ScreenPart:
        self.means = {layer: (s / self.count) for layer, s in self.sums.items()}
        return ScreenPart()


@contextlib.contextmanager
def ablated(adapter, heads: Sequence[Head], mode: str, means: Optional[Dict[int, torch.Tensor]] = None):
    """Within the block, the given heads' o_proj-input slices are zeroed or mean-replaced."""
    if mode not in MODES:
        raise EmergenceError(f"unknown ablation mode {mode!r}; valid: {', '.join(MODES)}")
    by_layer: Dict[int, List[int]] = {}
    for layer, head in heads:
        if not (0 <= layer < adapter.n_layers and 0 <= head < adapter.n_heads):
            raise EmergenceError(f"head {layer}.{head} does not exist; layers 0-{adapter.n_layers - 1}, "
                                 f"heads 0-{adapter.n_heads - 1}")
        by_layer.setdefault(layer, []).append(head)
    handles = []

    def make_hook(layer: int, idx: List[int]):
        def hook(_module, args):
            x = args[0]
            z = x.view(*x.shape[:-1], adapter.n_heads, adapter.head_dim).clone()
            if mode == "zero":
                z[..., idx, :] = 0
            else:
                z[..., idx, :] = means[layer][: z.shape[-3], idx, :].to(z.dtype)
            return (z.view_as(x),) + tuple(args[1:])

        return hook

    try:
        for layer, idx in by_layer.items():
            handles.append(adapter.output_projections[layer].register_forward_pre_hook(make_hook(layer, idx)))
        yield
    finally:
        for h in handles:
            h.remove()


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
        R = len(self.control_effects)
        return float((1 + np.sum(self.control_effects >= self.effect)) / (R + 1)) if R else float("nan")

    def metrics(self) -> Dict[str, float]:
        c = self.control_effects
        return {
            "ablation.group_size": float(len(self.group)),
            "ablation.loss_clean": self.loss_clean, "ablation.accuracy_clean": self.accuracy_clean,
            "ablation.loss_group": self.loss_group, "ablation.accuracy_group": self.accuracy_group,
            "ablation.effect": self.effect,
            "ablation.control_mean": float(c.mean()) if len(c) else float("nan"),
            "ablation.control_std": float(c.std(ddof=1)) if len(c) > 1 else float("nan"),
            "ablation.control_max": float(c.max()) if len(c) else float("nan"),
            "ablation.controls": float(len(c)),
            "ablation.control_pool": float(self.pool_size),
            "ablation.p_value": self.p_value,
        }


def _loss(model, adapter, probe) -> Tuple[float, float]:
    (part,) = run_pass(model, adapter, probe, [InductionLossReducer()], progress=False)
    return part.metrics["induction_loss"], part.metrics["induction_accuracy"]


def group_ablation(model, adapter, probe, group: Sequence[Head], mode: str = "mean", controls: int = 20,
                   seed: int = 0, progress: bool = True, exclude: Sequence[Head] = (),
                   clean: Optional[Tuple[float, float]] = None,
                   means: Optional[Dict[int, torch.Tensor]] = None) -> AblationResult:
    """Ablate ``group`` and ``controls`` random groups of the same size drawn from the
    heads outside ``group`` and ``exclude`` (METHODS section 7: ``exclude`` empty).

    ``clean`` (induction loss, accuracy over ``probe``) and ``means`` (per-position head
    means over ``probe``, for ``mode="mean"``) when the screen's own pass measured them;
    else they are measured here (one pass for both). The ablated passes share each batch's
    clean prefix (:func:`emergence.screens.prefix.run_ablations`)."""
    from emergence.screens.prefix import run_ablations

    if (mode == "mean" and means is None) or clean is None:
        reducers = [InductionLossReducer()] + ([HeadMeanReducer()] if mode == "mean" and means is None else [])
        run_pass(model, adapter, probe, reducers, progress=False)
        clean = reducers[0].first() if clean is None else clean
        means = reducers[1].means if len(reducers) > 1 else means
    group = [tuple(h) for h in group]
    left_out = set(group) | {tuple(h) for h in exclude}
    others = [(l, h) for l in range(adapter.n_layers) for h in range(adapter.n_heads) if (l, h) not in left_out]
    rng = np.random.default_rng(seed)
    control_sets = []
    if group and len(others) >= len(group):
        control_sets = [[others[i] for i in rng.choice(len(others), size=len(group), replace=False)]
                        for _ in range(controls)]
    if not group:  # nothing ablated: the clean model
        return AblationResult([], clean[0], clean[1], clean[0], clean[1], np.array([]), pool_size=len(others))
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
    """Refuse ``screen.ablation`` heads before any model is loaded: a malformed name, no heads
    for ``group: list``, or (when ``limits``, an :class:`emergence.probes.ModelLimits`, knows
    the model's shape) a head the model does not have."""
    heads = parse_heads(cfg.heads)
    if cfg.group == "list" and not heads:
        raise EmergenceError("screen.ablation.group=list needs screen.ablation.heads=['layer.head', ...], "
                             "e.g. \"screen.ablation.heads=['3.1','2.0']\"")
    layers, per_layer = getattr(limits, "layers", None), getattr(limits, "heads", None)
    if layers and per_layer:
        for layer, head in heads:
            if not (0 <= layer < layers and 0 <= head < per_layer):
                raise EmergenceError(f"screen.ablation.heads has {layer}.{head}, not a head of {limits.model}; "
                                     f"valid: layers 0-{layers - 1}, heads 0-{per_layer - 1}")
