"""Ablating heads: their slices of the output-projection input replaced, within a block.

:func:`ablated` zeroes the given heads' slices (``mode="zero"``) or replaces them by their
per-position mean over the probe (``mode="mean"``), with a forward pre-hook on each layer's
output projection (head masking is gone from transformers 5); every hook is removed when
the block ends. :class:`HeadMeanReducer` measures those means in a screen's pass. The group
ablations (emergence/screens/ablation.py, xu2026_ablation.py) and the prefix runner
(emergence/screens/prefix.py) use both.
"""

from __future__ import annotations

import contextlib
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from emergence import EmergenceError
from emergence.config import ABLATION_MODES
from emergence.screens.base import Reducer, ScreenPart

Head = Tuple[int, int]


def by_layer(heads: Sequence[Head]) -> Dict[int, List[int]]:
    """The distinct heads by layer, both in ascending order."""
    out: Dict[int, List[int]] = {}
    for layer, head in sorted(set(map(tuple, heads))):
        out.setdefault(int(layer), []).append(int(head))
    return out


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
        B = input_ids.shape[0]
        self.take = B if self.limit is None else max(0, min(B, self.limit - self.count))
        self.count += self.take

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
    heads = list(heads)  # read twice (checked, then grouped by layer): a generator would ablate nothing
    if mode not in ABLATION_MODES:
        raise EmergenceError(f"unknown ablation mode {mode!r}; valid: {', '.join(ABLATION_MODES)}")
    for layer, head in heads:
        if not (0 <= layer < adapter.n_layers and 0 <= head < adapter.n_heads):
            raise EmergenceError(f"head {layer}.{head} does not exist; layers 0-{adapter.n_layers - 1}, "
                                 f"heads 0-{adapter.n_heads - 1}")
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
        for layer, idx in by_layer(heads).items():
            handles.append(adapter.output_projections[layer].register_forward_pre_hook(make_hook(layer, idx)))
        yield
    finally:
        for h in handles:
            h.remove()
