"""One streaming forward pass, many per-layer reducers.

``run_pass`` registers hooks on every attention module (its forward output holds that
layer's attention weights under eager attention) and every output projection (its
input holds the per-head outputs), runs the probe batch by batch, and hands each
tensor to the reducers the moment it is produced. Nothing is kept between layers:
at no time is more than one layer's attention for one batch alive, so peak memory
does not grow with N or with the number of layers.

A reducer subclasses :class:`Reducer`, sets which streams it needs, and returns a
:class:`ScreenPart` (per-head columns and summary metrics) from ``finish``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from emergence.adapters import ArchitectureAdapter
from emergence.probes import Probe


@dataclass
class ScreenPart:
    #: Per-head values, each an array [n_layers, n_heads], keyed by column name.
    heads: Dict[str, np.ndarray] = field(default_factory=dict)
    #: Whole-model scalars, keyed by metric name.
    metrics: Dict[str, float] = field(default_factory=dict)


class Reducer:
    """Consumes per-layer tensors of a forward pass as they are produced."""

    needs_attention = False
    needs_head_outputs = False
    needs_hidden = False

    def begin(self, adapter: ArchitectureAdapter, probe: Probe) -> None:
        self.adapter = adapter
        self.probe = probe

    def start_batch(self, input_ids: torch.Tensor) -> None:
        """Called before each batch's forward pass with its token ids [B, T]."""

    def attention(self, layer: int, weights: torch.Tensor) -> None:
        """``weights``: [B, H, T, T], rows sum to 1 over visible keys."""

    def head_outputs(self, layer: int, z: torch.Tensor) -> None:
        """``z``: [B, T, H, d_head], the input of the layer's output projection."""

    def hidden(self, last_hidden: torch.Tensor, model: torch.nn.Module) -> None:
        """The final (normed) hidden states [B, T, d_model] of the batch."""

    def finish(self) -> ScreenPart:
        raise NotImplementedError


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The decoder stack without the LM head (``model.gpt_neox``, ``model.model``)."""
    return getattr(model, model.base_model_prefix)


def run_pass(model: torch.nn.Module, adapter: ArchitectureAdapter, probe: Probe,
             reducers: Sequence[Reducer], device: Optional[torch.device] = None,
             progress: bool = True, description: str = "screen") -> List[ScreenPart]:
    """Run the probe through ``model`` once, feeding every reducer; hooks are always removed."""
    device = device or next(model.parameters()).device
    for r in reducers:
        r.begin(adapter, probe)
    handles = []
    want_attention = [r for r in reducers if r.needs_attention]
    want_heads = [r for r in reducers if r.needs_head_outputs]
    want_hidden = [r for r in reducers if r.needs_hidden]
    try:
        for layer, module in enumerate(adapter.attention_modules):
            if want_attention:
                def on_attention(_mod, _args, output, layer=layer):
                    weights = output[1]
                    if weights is None:
                        raise RuntimeError("attention weights are None: load the model with "
                                           "attn_implementation='eager'")
                    for r in want_attention:
                        r.attention(layer, weights)

                handles.append(module.register_forward_hook(on_attention))
        for layer, module in enumerate(adapter.output_projections):
            if want_heads:
                def on_heads(_mod, args, layer=layer):
                    x = args[0]
                    z = x.view(*x.shape[:-1], adapter.n_heads, adapter.head_dim)
                    for r in want_heads:
                        r.head_outputs(layer, z)

                handles.append(module.register_forward_pre_hook(on_heads))
        decoder = base_model(model)
        batches = tqdm(list(probe.batches()), desc=description, unit="batch", disable=not progress,
                       leave=False)
        with torch.inference_mode():
            for input_ids in batches:
                for r in reducers:
                    r.start_batch(input_ids)
                out = decoder(input_ids=input_ids.to(device), use_cache=False)
                for r in want_hidden:
                    r.hidden(out.last_hidden_state, model)
    finally:
        for h in handles:
            h.remove()
    return [r.finish() for r in reducers]
