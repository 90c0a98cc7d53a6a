r"""The six-class selectivity screen (METHODS section 5), reduced layer by layer.

For a class c with target keys T_c(q) over queries Q_c, and A[q, k] the attention of
query q on key k <= q,

.. math::

    S_c = \frac{\sum_{q \in Q_c} \frac{1}{|T_c(q)|} \sum_{k \in T_c(q)} A[q,k]}
               {\sum_{q \in Q_c} \frac{1}{|B_c(q)|} \sum_{k \in B_c(q)} A[q,k]}

where the baseline B_c(q) holds the visible keys that are not targets. A uniform
head scores 1. For the capability classes (all but ``bos``) key 0 is left out of
both the targets and the baseline, so that a sink does not hide a capability head.
Since each attention row sums to 1, the baseline mass is ``1 - target - key0``: only
target masses are ever gathered.

Targets, from the tokens (so one definition serves the synthetic probe and text):

=================  ===========================================  ==================
class              T_c(q)                                        Q_c
=================  ===========================================  ==================
induction          j+1 for each earlier copy j >= 1 of token q  q with a copy
duplicate_token    each earlier copy j >= 1 of token q          q with a copy
previous_token     q-1                                           q >= 2
self               q                                             q >= 1
local              q-w .. q-2, key 0 left out                    q >= w
bos                0                                             q >= 1
=================  ===========================================  ==================

Departure, documented: METHODS averages A over the batch before the ratio. When the
targets are the same for every sequence (the synthetic probe: query n+i copies key i)
that is what is computed here, from the batch sum of A. When they differ between
sequences (text), the per-query ratios' terms are summed over (sequence, query)
pairs, which equals METHODS' definition whenever the targets depend only on position.
Queries whose baseline is empty (e.g. ``self`` at q = 1) are left out.
"""

from __future__ import annotations

from typing import Dict

import numpy as np
import torch

from emergence.config import HEAD_CLASSES
from emergence.screens.base import Reducer, ScreenPart

CAPABILITY_CLASSES = tuple(c for c in HEAD_CLASSES if c != "bos")


def copy_masks(input_ids: torch.Tensor):
    """Boolean [B, T, T] masks of duplicate targets (earlier copies, key 0 excluded) and
    induction targets (the key after each earlier copy)."""
    tok = input_ids
    T = tok.shape[1]
    earlier = torch.ones(T, T, dtype=torch.bool).tril(-1)
    earlier[:, 0] = False
    duplicate = (tok[:, :, None] == tok[:, None, :]) & earlier
    induction = torch.zeros_like(duplicate)
    induction[:, :, 1:] = duplicate[:, :, :-1]
    return duplicate, induction


class SelectivityReducer(Reducer):
    """Accumulates, per layer and head, the numerator and denominator of every S_c."""

    needs_attention = True

    def __init__(self, local_window: int = 4):
        if local_window < 2:
            raise ValueError(f"screen.local_window must be >= 2 (got {local_window})")
        self.local_window = local_window

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        shape = (adapter.n_layers, adapter.n_heads)
        self.num = {c: np.zeros(shape) for c in HEAD_CLASSES}
        self.den = {c: np.zeros(shape) for c in HEAD_CLASSES}
        self.first_sum = np.zeros(shape)
        self.first_count = 0

    def start_batch(self, input_ids: torch.Tensor) -> None:
        duplicate, induction = copy_masks(input_ids)
        # The synthetic probe has the same targets in every sequence: reduce the batch sum of A.
        self.shared = bool((duplicate == duplicate[:1]).all())
        if self.shared:
            duplicate, induction = duplicate[:1], induction[:1]
        self.masks = {"duplicate_token": duplicate, "induction": induction}
        self.batch = input_ids.shape[0]
        self.cache = {}

    def _weights(self, B: int, T: int, device) -> Dict[str, tuple]:
        """Per class: (target count [B,T], query weight numerator [B,T], denominator [B,T])."""
        key = (B, T, device)
        if key in self.cache:
            return self.cache[key]
        q = torch.arange(T, device=device, dtype=torch.float32).expand(B, T)
        w = self.local_window
        local_count = torch.zeros(T, device=device)
        for d in range(2, w + 1):
            local_count[d + 1:] += 1  # key q-d >= 1 only (key 0 left out)
        counts = {
            "previous_token": (q >= 2).float(),
            "self": (q >= 1).float(),
            "local": torch.where(q >= w, local_count.expand(B, T), torch.zeros_like(q)),
            "bos": (q >= 1).float(),
        }
        for c, mask in self.masks.items():
            counts[c] = mask.to(device).sum(-1).float()
        out = {}
        for c, count in counts.items():
            # Baseline keys: (q+1) visible, less the target key 0 (bos), or less the
            # targets and key 0 (capability classes).
            baseline = q if c == "bos" else q - count
            valid = (count > 0) & (baseline > 0)
            out[c] = (count,
                      torch.where(valid, 1.0 / count.clamp(min=1), torch.zeros_like(q)),
                      torch.where(valid, 1.0 / baseline.clamp(min=1), torch.zeros_like(q)))
        self.cache[key] = out
        return out

    def attention(self, layer: int, weights: torch.Tensor) -> None:
        if self.shared:
            A = weights.sum(0, keepdim=True, dtype=torch.float32)
        else:
            A = weights if weights.dtype == torch.float32 else weights.float()
        B, H, T, _ = A.shape
        key0 = A[..., 0]
        row = A.sum(-1)
        target = {
            "bos": key0,
            "self": A.diagonal(0, -2, -1),
            "previous_token": torch.nn.functional.pad(A.diagonal(-1, -2, -1), (1, 0)),
        }
        local = torch.zeros_like(key0)
        for d in range(2, self.local_window + 1):
            diag = A.diagonal(-d, -2, -1).clone()  # queries q = d .. T-1, key q-d
            diag[..., 0] = 0.0  # key 0 is left out of the capability classes
            local[..., d:] += diag
        target["local"] = local
        for c, mask in self.masks.items():
            target[c] = (A * mask.to(A.device)[:, None]).sum(-1)
        weights_by_class = self._weights(B, T, A.device)
        for c in HEAD_CLASSES:
            _, w_num, w_den = weights_by_class[c]
            mass = target[c]
            baseline = row - mass if c == "bos" else row - mass - key0
            self.num[c][layer] += torch.einsum("bhq,bq->h", mass, w_num).double().cpu().numpy()
            self.den[c][layer] += torch.einsum("bhq,bq->h", baseline.clamp(min=0), w_den).double().cpu().numpy()
        self.first_sum[layer] += (key0[..., 1:].sum((0, 2))).double().cpu().numpy()
        if layer == 0:
            self.first_count += self.batch * (T - 1)

    def finish(self) -> ScreenPart:
        heads = {}
        with np.errstate(divide="ignore", invalid="ignore"):
            for c in HEAD_CLASSES:
                # No baseline mass at all: perfectly selective (inf) if the targets got any, else undefined.
                heads[f"selectivity.{c}"] = np.where(self.den[c] > 0, self.num[c] / self.den[c],
                                                     np.where(self.num[c] > 0, np.inf, np.nan))
        heads["first_token_attention"] = self.first_sum / max(self.first_count, 1)
        return ScreenPart(heads=heads)
