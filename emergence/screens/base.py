"""One streaming forward pass, many per-layer reducers.

``run_pass`` switches the model to the screen's attention (:mod:`emergence.screens.attention`:
SDPA for every layer's output, and the attention weights of only the query rows the
reducers ask for, recomputed from Q and K), registers hooks on every attention module
(its forward output holds those rows) and every output projection (its input holds the
per-head outputs), runs the probe batch by batch, and hands each tensor to the reducers
the moment it is produced. Nothing is kept between layers: at no time is more than one
layer's attention rows for one batch alive, so peak memory does not grow with N or with
the number of layers; a pass whose reducers read no attention computes no map at all.

A reducer subclasses :class:`Reducer`, sets which streams it needs (and, for attention,
which query rows: :attr:`Reducer.attention_rows`), and returns a :class:`ScreenPart`
(per-head columns and summary metrics) from ``finish``. Reducers keep their running sums
on the device the tensors arrive on (:func:`accumulator`) and move them to the host once,
in ``finish``, so a pass on an accelerator is not stalled by a copy per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from emergence.common.progress import bars_disabled

from emergence.adapters import ArchitectureAdapter
from emergence.loading import matmul_precision
from emergence.probes import Probe
from emergence.screens.attention import Rows, merge_rows, screen_attention


@dataclass
class ScreenPart:
    #: Per-head values, each an array [n_layers, n_heads], keyed by column name.
    heads: Dict[str, np.ndarray] = field(default_factory=dict)
    #: Whole-model scalars, keyed by metric name.
    metrics: Dict[str, float] = field(default_factory=dict)


class Reducer:
    """Consumes per-layer tensors of a forward pass as they are produced."""

    needs_attention = False
    #: The query rows whose attention this reducer reads: None = every row (the full map),
    #: else positions (negative ones from the end, e.g. ``(-1,)``: the last query only).
    attention_rows: Rows = None
    needs_head_outputs = False
    needs_hidden = False

    def begin(self, adapter: ArchitectureAdapter, probe: Probe) -> None:
        self.adapter = adapter
        self.probe = probe

    def start_batch(self, input_ids: torch.Tensor) -> None:
        """Called before each batch's forward pass with its token ids [B, T]."""

    def attention(self, layer: int, weights: torch.Tensor) -> None:
        """``weights``: [B, H, R, T] float32, the rows :attr:`attention_rows` asks for in their
        order (R = T, every query, when it is None); each row sums to 1 over visible keys."""

    def head_outputs(self, layer: int, z: torch.Tensor) -> None:
        """``z``: [B, T, H, d_head], the input of the layer's output projection."""

    def hidden(self, last_hidden: torch.Tensor, model: torch.nn.Module) -> None:
        """The final (normed) hidden states [B, T, d_model] of the batch."""

    def finish(self) -> ScreenPart:
        raise NotImplementedError


class RowsReducer(Reducer):
    """A reducer that tracks which probe rows the current batch holds (:attr:`rows`: start, stop)."""

    def begin(self, adapter: ArchitectureAdapter, probe: Probe) -> None:
        super().begin(adapter, probe)
        self.offset = 0
        self.rows = (0, 0)

    def start_batch(self, input_ids: torch.Tensor) -> None:
        self.rows = (self.offset, self.offset + input_ids.shape[0])
        self.offset += input_ids.shape[0]


def accumulator(device: torch.device) -> torch.device:
    """Where a reducer keeps its float64 running sums: the tensors' own device, but the CPU
    for MPS (which has no float64)."""
    return torch.device("cpu") if device.type == "mps" else device


def rows_for(reducers: Sequence[Reducer], seq_len: int) -> Rows:
    """The query rows a pass computes: the union of what ``reducers`` read (None: every row)."""
    return merge_rows([r.attention_rows for r in reducers if r.needs_attention], seq_len)


def _deliver(reducer: Reducer, union: Rows, seq_len: int):
    """How ``reducer`` reads the pass's rows ``union``: None (as they are) or an index into them."""
    own = reducer.attention_rows
    if union is None or own is None or tuple(r % seq_len for r in own) == union:
        return None
    return torch.tensor([union.index(r % seq_len) for r in own])


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The decoder stack without the LM head (``model.gpt_neox``, ``model.model``)."""
    return getattr(model, model.base_model_prefix)


def run_pass(model: torch.nn.Module, adapter: ArchitectureAdapter, probe: Probe,
             reducers: Sequence[Reducer], progress: bool = True, description: str = "screen") -> List[ScreenPart]:
    """Run the probe through ``model`` once, feeding every reducer; hooks are always removed
    and the model's attention implementation restored."""
    device = next(model.parameters()).device
    for r in reducers:
        r.begin(adapter, probe)
    handles = []
    want_attention = [r for r in reducers if r.needs_attention]
    want_heads = [r for r in reducers if r.needs_head_outputs]
    want_hidden = [r for r in reducers if r.needs_hidden]
    rows = rows_for(reducers, probe.seq_len) if want_attention else ()
    delivery = [(r, _deliver(r, rows, probe.seq_len)) for r in want_attention]
    taps = adapter.attention_modules if want_attention else ()
    try:
        for layer, module in enumerate(taps):
            def on_attention(_mod, _args, output, layer=layer):
                weights = output[1]
                if weights is None:
                    raise RuntimeError(f"layer {layer}'s attention returned no weights: its module does not "
                                       "use transformers' attention interface")
                with matmul_precision("float32"):  # reducers sum in IEEE float32 even in a TF32 pass
                    for r, index in delivery:
                        r.attention(layer, weights if index is None else
                                    weights.index_select(2, index.to(weights.device)))

            handles.append(module.register_forward_hook(on_attention))
        for layer, module in enumerate(adapter.output_projections if want_heads else ()):
            def on_heads(_mod, args, layer=layer):
                x = args[0]
                z = x.view(*x.shape[:-1], adapter.n_heads, adapter.head_dim)
                with matmul_precision("float32"):
                    for r in want_heads:
                        r.head_outputs(layer, z)

            handles.append(module.register_forward_pre_hook(on_heads))
        decoder = base_model(model)
        batches = tqdm(list(probe.batches()), desc=description, unit="batch", disable=bars_disabled(progress),
                       leave=False)
        with torch.inference_mode(), screen_attention(model, taps, rows):
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
