r"""The selectivity screen (METHODS section 5), reduced layer by layer, for every
registered head class (:mod:`emergence.common.head_classes`).

For a class c with target keys T_c(q) over queries Q_c, and A[q, k] the attention of
query q on key k <= q,

.. math::

    S_c = \frac{\sum_{q \in Q_c} \frac{1}{|T_c(q)|} \sum_{k \in T_c(q)} A[q,k]}
               {\sum_{q \in Q_c} \frac{1}{|B_c(q)|} \sum_{k \in B_c(q)} A[q,k]}

where the baseline B_c(q) holds the visible keys that are not targets. A uniform
head scores 1. Key 0 follows the class's policy (``HeadClass.excludes_key0``): for
the capability classes (all but ``bos``) it is left out of both the targets and the
baseline, so that a sink does not hide a capability head. Since each attention row
sums to 1, the baseline mass is ``row - target`` (``- key0`` when key 0 is left out):
only target masses are ever gathered. Q_c holds the queries with at least one target
and a non-empty baseline.

Targets come from the tokens (so one definition serves the synthetic probe and text);
each class's ``targets(input_ids, settings)`` gives them as a mask (the six built-in
ones, for reference):

=================  ===========================================  ==================
class              T_c(q)                                        Q_c
=================  ===========================================  ==================
induction          j+1 for each earlier copy j >= 1 of token q   q with a copy
duplicate_token    each earlier copy j >= 1 of token q           q with a copy
previous_token     q-1                                           q >= 2
self               q                                             q >= 1
local              q-w .. q-2, key 0 left out                    q >= w
bos                0                                             q >= 1
=================  ===========================================  ==================

Computation: the masks of all classes are stacked into one tensor M [C, B, T, T] and
every class's target mass comes from one contraction ``einsum(A, M)`` per layer.

Departure, documented: METHODS averages A over the batch before the ratio. When the
targets are the same for every sequence (the synthetic probe: query n+i copies key i)
that is what is computed here, from the batch sum of A (M then has one sequence).
When they differ between sequences (text), the per-query ratios' terms are summed over
(sequence, query) pairs, which equals METHODS' definition whenever the targets depend
only on position. Queries whose baseline is empty (e.g. ``self`` at q = 1) are left out.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

from emergence.common import head_classes
from emergence.common.contract import FIRST_TOKEN_COLUMN, selectivity_column
from emergence.common.head_classes import HeadClass, local
from emergence.screens.base import Reducer, ScreenPart, accumulator


def class_masks(input_ids: torch.Tensor, classes: Sequence[HeadClass], settings: Mapping) -> tuple:
    """The target masks of ``classes`` stacked, and whether they are shared by the batch.

    Returns ``(M, shared)``: M boolean [C, B', T, T], the class's key-0 policy applied and
    only visible keys (k <= q) kept; ``shared`` when every sequence of the batch has the
    same targets, and then B' = 1, else B' = B.
    """
    B, T = input_ids.shape
    visible = torch.ones(T, T, dtype=torch.bool, device=input_ids.device).tril()
    masks = []
    for c in classes:
        m = c.targets(input_ids, settings).to(torch.bool) & visible
        if c.excludes_key0:
            m[..., 0] = False
        if m.dim() != 3 or m.shape[1:] != (T, T) or m.shape[0] not in (1, B):
            raise ValueError(f"head class {c.name!r}: targets gave shape {tuple(m.shape)}; expected [B or 1, T, T] "
                             f"with B={B}, T={T}")
        masks.append(m)
    shared = all(m.shape[0] == 1 or bool((m == m[:1]).all()) for m in masks)
    return torch.stack([m[:1] if shared else m.expand(B, T, T) for m in masks]), shared


class SelectivityReducer(Reducer):
    """Accumulates, per layer and head, the numerator and denominator of S_c of every registered
    class (as registered at :meth:`begin`); ``local_window``: the window w of the ``local`` class."""

    needs_attention = True

    def __init__(self, local_window: int = local.DEFAULT_WINDOW):
        self.local_window = local_window

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.classes = head_classes.classes()
        self.settings = {"local_window": self.local_window}
        #: 1.0 for a class whose key 0 is left out of the baseline, else 0.0.
        self.drop_key0 = torch.tensor([1.0 if c.excludes_key0 else 0.0 for c in self.classes])
        self.shape = (adapter.n_layers, adapter.n_heads, len(self.classes))
        self.sums = None  # (num, den, first) float64 on the attention's device, made at the first layer
        self.first_count = 0

    def start_batch(self, input_ids: torch.Tensor) -> None:
        self.masks, self.shared = class_masks(input_ids, self.classes, self.settings)
        self.batch = input_ids.shape[0]
        self.on_device = None  # (M, query weights) on the attention's device, made at the first layer

    def _prepare(self, device) -> tuple:
        """The float masks [C, B', T, T] and, per class, the query weights 1/|T_c(q)| and
        1/|B_c(q)| on Q_c (0 elsewhere), each [C, B', T], on ``device``."""
        if self.on_device is not None and self.on_device[0].device == device:
            return self.on_device
        M = self.masks.to(device=device, dtype=torch.float32)
        T = M.shape[-1]
        count = M.sum(-1)  # [C, B', T] targets per query
        visible = torch.arange(1, T + 1, device=device, dtype=torch.float32)  # q+1 keys at query q
        drop = self.drop_key0.to(device)[:, None, None]
        baseline = visible - count - drop
        valid = (count > 0) & (baseline > 0)
        zero = torch.zeros_like(count)
        w_num = torch.where(valid, 1.0 / count.clamp(min=1), zero)
        w_den = torch.where(valid, 1.0 / baseline.clamp(min=1), zero)
        self.on_device = (M, w_num, w_den, drop[:, 0, 0])
        return self.on_device

    def attention(self, layer: int, weights: torch.Tensor) -> None:
        if self.shared:
            A = weights.sum(0, keepdim=True, dtype=torch.float32)
        else:
            A = weights if weights.dtype == torch.float32 else weights.float()
        M, w_num, w_den, drop = self._prepare(A.device)
        key0 = A[..., 0]  # [B', H, T]
        row = A.sum(-1)
        mass = torch.einsum("bhqk,cbqk->bhcq", A, M)  # [B', H, C, T] target mass of every class
        baseline = (row[:, :, None] - mass - drop[:, None] * key0[:, :, None]).clamp(min=0)
        if self.sums is None:
            where = accumulator(A.device)
            self.sums = (torch.zeros(self.shape, dtype=torch.float64, device=where),
                         torch.zeros(self.shape, dtype=torch.float64, device=where),
                         torch.zeros(self.shape[:2], dtype=torch.float64, device=where))
        num, den, first = self.sums
        num[layer] += torch.einsum("bhcq,cbq->hc", mass, w_num).to(num.device, torch.float64)
        den[layer] += torch.einsum("bhcq,cbq->hc", baseline, w_den).to(num.device, torch.float64)
        first[layer] += key0[..., 1:].sum((0, 2)).to(num.device, torch.float64)
        if layer == 0:
            self.first_count += self.batch * (A.shape[-1] - 1)

    def finish(self) -> ScreenPart:
        if self.sums is None:
            self.num = self.den = np.zeros(self.shape)
            self.first_sum = np.zeros(self.shape[:2])
        else:
            self.num, self.den, self.first_sum = (t.cpu().numpy() for t in self.sums)
        heads = {}
        with np.errstate(divide="ignore", invalid="ignore"):
            for i, c in enumerate(self.classes):
                num, den = self.num[..., i], self.den[..., i]
                # No baseline mass at all: perfectly selective (inf) if the targets got any, else undefined.
                heads[selectivity_column(c.name)] = np.where(den > 0, num / den, np.where(num > 0, np.inf, np.nan))
        heads[FIRST_TOKEN_COLUMN] = self.first_sum / max(self.first_count, 1)
        return ScreenPart(heads=heads)
