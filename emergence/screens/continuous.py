"""Continuous metrics of the probe: induction loss and top-1 accuracy.

Threshold counts can make a smooth change look sharp (Schaeffer et al. 2023), so
every screen also reports continuous measures. The induction targets are the
positions q whose next token is predictable by copying: token q has an earlier
copy j >= 1 and token j+1 equals token q+1 (for the synthetic probe: q = n+1 ..
2n-1, predicting a_{i+1}). Loss is the mean cross-entropy there; logits are
computed only at those positions, in chunks, so a 50k vocabulary stays cheap.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from emergence.common.head_classes.duplicate_token import earlier_copies
from emergence.screens.base import Reducer, ScreenPart


def induction_targets(input_ids: torch.Tensor) -> torch.Tensor:
    """Boolean [B, T]: position q predicts token q+1 by induction."""
    nxt = input_ids.roll(-1, 1)  # token q+1 (the last position, which has none, is cleared below)
    # earlier_copies[b, q, j]: j < q is a copy of token q; does token j+1 equal token q+1?
    mask = (earlier_copies(input_ids)[:, :, :-1] & (input_ids[:, None, 1:] == nxt[:, :, None])).any(-1)
    mask[:, -1] = False
    return mask


class InductionLossReducer(Reducer):
    """Induction loss and top-1 accuracy. Per-sequence sums (loss, correct, targets) are kept
    on the logits' device until ``finish``, so the metrics of any first n sequences are
    known afterwards (:meth:`first`): the screen's pass serves as the ablation's clean pass."""

    needs_hidden = True

    def __init__(self, chunk: int = 1024):
        self.chunk = chunk

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.parts = []  # per batch [3, B]: loss sum, correct, targets
        self.values = np.zeros((3, 0))

    def start_batch(self, input_ids: torch.Tensor) -> None:
        self.input_ids = input_ids
        self.mask = induction_targets(input_ids)

    def hidden(self, last_hidden: torch.Tensor, model: torch.nn.Module) -> None:
        head = model.get_output_embeddings()
        targets = torch.zeros_like(self.input_ids)
        targets[:, :-1] = self.input_ids[:, 1:]
        mask = self.mask.to(last_hidden.device)
        h = last_hidden[mask]
        y = targets.to(last_hidden.device)[mask]
        seq = mask.nonzero()[:, 0]  # the sequence of each target row
        sums = torch.zeros(3, mask.shape[0], dtype=torch.float64, device=last_hidden.device)
        for start in range(0, h.shape[0], self.chunk):
            logits = head(h[start:start + self.chunk]).float()
            yy = y[start:start + self.chunk]
            rows = seq[start:start + self.chunk]
            sums[0].index_add_(0, rows, torch.nn.functional.cross_entropy(logits, yy, reduction="none").double())
            sums[1].index_add_(0, rows, (logits.argmax(-1) == yy).double())
        sums[2] = mask.sum(-1).double()
        self.parts.append(sums)

    def first(self, n: Optional[int] = None) -> tuple:
        """(induction loss, top-1 accuracy) over the first ``n`` sequences (all: None); NaN
        without targets."""
        v = self.values[:, :n]
        count = v[2].sum()
        if count == 0:
            return float("nan"), float("nan")
        return float(v[0].sum() / count), float(v[1].sum() / count)

    def finish(self) -> ScreenPart:
        self.values = torch.cat([p.cpu() for p in self.parts], 1).numpy() if self.parts else np.zeros((3, 0))
        count = float(self.values[2].sum())
        loss, accuracy = self.first()
        return ScreenPart(metrics={"induction_loss": loss, "induction_accuracy": accuracy,
                                   "induction_targets": count})
