"""Continuous metrics of the probe: induction loss and top-1 accuracy.

Threshold counts can make a smooth change look sharp (Schaeffer et al. 2023), so
every screen also reports continuous measures. The induction targets are the
positions q whose next token is predictable by copying: token q has an earlier
copy j >= 1 and token j+1 equals token q+1 (for the synthetic probe: q = n+1 ..
2n-1, predicting a_{i+1}). Loss is the mean cross-entropy there; logits are
computed only at those positions, in chunks, so a 50k vocabulary stays cheap.
"""

from __future__ import annotations

import torch

from emergence.screens.base import Reducer, ScreenPart
from emergence.screens.selectivity import copy_masks


def induction_targets(input_ids: torch.Tensor) -> torch.Tensor:
    """Boolean [B, T]: position q predicts token q+1 by induction."""
    duplicate, _ = copy_masks(input_ids)
    nxt = torch.zeros_like(input_ids)
    nxt[:, :-1] = input_ids[:, 1:]
    # duplicate[b, q, j]: j < q is a copy of token q; does token j+1 equal token q+1?
    follows = torch.zeros_like(duplicate)
    follows[:, :, :-1] = duplicate[:, :, :-1] & (input_ids[:, None, 1:] == nxt[:, :, None])
    mask = follows.any(-1)
    mask[:, -1] = False
    return mask


class InductionLossReducer(Reducer):
    needs_hidden = True

    def __init__(self, chunk: int = 1024):
        self.chunk = chunk

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.loss_sum = 0.0
        self.correct = 0
        self.count = 0

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
        for start in range(0, h.shape[0], self.chunk):
            logits = head(h[start:start + self.chunk]).float()
            yy = y[start:start + self.chunk]
            self.loss_sum += float(torch.nn.functional.cross_entropy(logits, yy, reduction="sum"))
            self.correct += int((logits.argmax(-1) == yy).sum())
        self.count += int(h.shape[0])

    def finish(self) -> ScreenPart:
        if self.count == 0:
            return ScreenPart(metrics={"induction_loss": float("nan"), "induction_accuracy": float("nan"),
                                       "induction_targets": 0.0})
        return ScreenPart(metrics={"induction_loss": self.loss_sum / self.count,
                                   "induction_accuracy": self.correct / self.count,
                                   "induction_targets": float(self.count)})
