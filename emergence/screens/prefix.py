r"""Ablation passes without repeated work: each batch's clean prefix runs once.

Ablating heads of layer f and above leaves layers 0..f-1 as they are, so for a batch the
residual stream at the input of layer f (the output of layer f-1) is the clean model's for
every head set whose first ablated layer is f or later. For head sets S_1..S_m with first
ablated layers f_1 <= ... <= f_m (an empty set: f = L, the clean model), each batch

1. advances the clean residual stream once, from the tokens to layer f_1, then from f_1
   to f_2, and so on, keeping only the current state ``[B, T, d]``;
2. for each set, runs layers f..L-1 and the final norm from that state with the set
   ablated (:func:`emergence.screens.head_ablation.ablated`), and hands the last hidden states
   to that set's reducer.

Decoder work per batch: max_i f_i layers of prefix plus sum_i (L - f_i) of suffixes,
instead of m x L; for the xu2026 recipe's group, 10 matched controls and whole-layer bound
(all in the group's layers) that is one prefix below the group's first layer instead of 12.

Every run goes through the model's own decoder forward (its embedding, masks, position
embeddings and layer loop, in the screen's attention: SDPA, :mod:`emergence.screens.attention`);
for that call the layers before the start are swapped in the family's layer list
(:meth:`emergence.families.Family.layer_list`) for :class:`Skip` modules, which pass their
input through, the last of them emitting the cached state instead; a clean advance reads
the state from a forward hook on its last layer while the layers after it are skipped.
This needs a decoder layer that maps hidden states to hidden states (true of every
registered family; tests check prefix reuse against full passes on each).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Dict, List, Optional, Sequence

import torch
from tqdm.auto import tqdm

from emergence.common.progress import bars_disabled

from emergence import families
from emergence.screens.attention import screen_attention
from emergence.screens.base import Reducer, ScreenPart, base_model
from emergence.screens.head_ablation import Head, ablated


class Skip(torch.nn.Module):
    """A decoder layer that is not run: returns its input, or ``emit`` (a cached state)."""

    def __init__(self, emit: Optional[torch.Tensor] = None, as_tuple: bool = False):
        super().__init__()
        self.emit = emit
        #: Answer ``(hidden_states, None)``, as a family's layers that return tuples do (BLOOM).
        self.as_tuple = as_tuple

    def forward(self, hidden_states, *args, **kwargs):
        out = hidden_states if self.emit is None else self.emit
        return (out, None) if self.as_tuple else out


@contextlib.contextmanager
def swapped(layer_list: torch.nn.ModuleList, replacements: Dict[int, torch.nn.Module]):
    """Within the block, ``layer_list[i]`` is ``replacements[i]``; the layers are put back after."""
    saved = {i: layer_list[i] for i in replacements}
    try:
        for i, module in replacements.items():
            layer_list[i] = module
        yield
    finally:
        for i, module in saved.items():
            layer_list[i] = module


def _start_from(state: Optional[torch.Tensor], start: int, as_tuple: bool = False) -> Dict[int, torch.nn.Module]:
    """Replacements that start the layer loop at ``start`` with ``state`` (its input)."""
    if start == 0:
        return {}
    out: Dict[int, torch.nn.Module] = {i: Skip(as_tuple=as_tuple) for i in range(start - 1)}
    out[start - 1] = Skip(state, as_tuple)
    return out


class PrefixRunner:
    """Runs spans of one model's decoder layers (see the module docstring)."""

    def __init__(self, model: torch.nn.Module, adapter):
        self.model = model
        self.decoder = base_model(model)
        family = families.get(adapter.family)
        self.layers = family.layer_list(model)
        self.n_layers = len(self.layers)
        self.as_tuple = family.layer_returns_tuple

    def advance(self, input_ids: torch.Tensor, state: Optional[torch.Tensor], start: int, stop: int) -> torch.Tensor:
        """The clean residual stream at the input of layer ``stop`` from ``state`` at the input of
        layer ``start`` (``start`` 0: from the tokens)."""
        if stop <= start:
            return state
        captured = {}

        def keep(_module, _args, output):
            captured["h"] = output[0] if isinstance(output, tuple) else output

        replacements = _start_from(state, start, self.as_tuple)
        replacements.update({i: Skip(as_tuple=self.as_tuple) for i in range(stop, self.n_layers)})
        handle = self.layers[stop - 1].register_forward_hook(keep)
        try:
            with swapped(self.layers, replacements):
                self.decoder(input_ids=input_ids, use_cache=False)
        finally:
            handle.remove()
        return captured["h"]

    def finish(self, input_ids: torch.Tensor, state: Optional[torch.Tensor], start: int) -> torch.Tensor:
        """The last hidden states (after the final norm) from ``state`` at the input of ``start``."""
        with swapped(self.layers, _start_from(state, start, self.as_tuple)):
            return self.decoder(input_ids=input_ids, use_cache=False).last_hidden_state


def first_layer(heads: Sequence[Head], n_layers: int) -> int:
    """The first ablated layer of a head set (``n_layers`` for an empty set: the clean model)."""
    return min((int(layer) for layer, _ in heads), default=n_layers)


def run_ablations(model, adapter, probe, sets: Sequence[Sequence[Head]], make_reducer: Callable[[], Reducer],
                  mode: str = "zero", means=None, progress: bool = False,
                  description: str = "ablation") -> List[ScreenPart]:
    """One reducer's part per head set, each set ablated (``mode``, ``means``) over the whole
    probe, with each batch's clean prefix run once (see the module docstring)."""
    runner = PrefixRunner(model, adapter)
    device = next(model.parameters()).device
    order = sorted(range(len(sets)), key=lambda i: first_layer(sets[i], runner.n_layers))
    reducers = [make_reducer() for _ in sets]
    for r in reducers:
        r.begin(adapter, probe)
    batches = tqdm(list(probe.batches()), desc=f"{description} ({len(sets)} head sets)", unit="batch",
                   disable=bars_disabled(progress), leave=False)
    with torch.inference_mode(), screen_attention(model):
        for input_ids in batches:
            for r in reducers:
                r.start_batch(input_ids)
            ids = input_ids.to(device)
            state, at = None, 0
            for i in order:
                start = first_layer(sets[i], runner.n_layers)
                state, at = runner.advance(ids, state, at, start), start  # (sets in order: start >= at)
                with ablated(adapter, sets[i], mode, means):
                    hidden = runner.finish(ids, state, at)
                reducers[i].hidden(hidden, model)
            del state
    return [r.finish() for r in reducers]
