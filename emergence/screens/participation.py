r"""Participation ratio of each head's output (METHODS section 6), in the screen's pass.

z_h is the head's slice of the output-projection input at the probe's second-half
queries (positions with an earlier copy of their token; key position 0 never
qualifies). A fixed set of P (sequence, query) samples is drawn once from the probe
with a seed, so the samples are the same at every revision. With
:math:`W = \sum_i (z_i - \bar z)(z_i - \bar z)^\top = (P-1)\hat C`, in float64,

.. math::

    \mathrm{PR} = \frac{(\operatorname{tr} \hat C)^2}{\operatorname{tr}(\hat C^2)}
    \in [1, d_{head}].

The plain estimate is biased low for small P. The corrected estimate replaces both
traces by their unbiased estimates under a Gaussian model, with m = P - 1 degrees of
freedom (:math:`E[(\operatorname{tr}W)^2] = m^2 (\operatorname{tr}C)^2 + 2m \operatorname{tr}C^2`,
:math:`E[\operatorname{tr}W^2] = m \,(\operatorname{tr}C)^2 + m(m+1) \operatorname{tr}C^2`):

.. math::

    \mathrm{PR}_{corr} = \frac{(m+1)\,a - 2b}{m\,b - a}, \quad
    a = (\operatorname{tr} W)^2,\; b = \operatorname{tr}(W^2),

clipped to [1, d_head]. Only the running sums of z and z z^T are kept (d x d per head).
"""

from __future__ import annotations

import numpy as np
import torch

from emergence.common.head_classes.duplicate_token import earlier_copies
from emergence.screens.base import RowsReducer, ScreenPart, accumulator


def participation_ratio(W: np.ndarray, samples: int, corrected: bool = False) -> np.ndarray:
    """PR from scatter matrices W [..., d, d] of ``samples`` centred samples."""
    a = np.trace(W, axis1=-2, axis2=-1) ** 2
    b = np.einsum("...ij,...ji->...", W, W)
    d = W.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        if not corrected:
            return np.where(b > 0, a / b, np.nan)
        m = samples - 1
        pr = ((m + 1) * a - 2 * b) / (m * b - a)
        return np.where(b > 0, np.clip(pr, 1.0, d), np.nan)


class ParticipationRatioReducer(RowsReducer):
    needs_head_outputs = True

    def __init__(self, samples: int = 2000, seed: int = 0):
        self.samples = samples
        self.seed = seed

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        eligible = earlier_copies(probe.input_ids).any(-1)  # [N, T]: queries with an earlier copy of their token
        flat = eligible.flatten().nonzero().flatten().numpy()
        rng = np.random.default_rng(self.seed)
        take = rng.choice(flat, size=min(self.samples, len(flat)), replace=False)
        chosen = np.zeros(eligible.numel(), dtype=bool)
        chosen[take] = True
        self.chosen = torch.from_numpy(chosen.reshape(eligible.shape))
        self.n_samples = int(chosen.sum())
        self.shape = (adapter.n_layers, adapter.n_heads, adapter.head_dim)
        self.sums = None  # (sum z, sum z z^T) float64 on the head outputs' device, made at the first layer

    def start_batch(self, input_ids: torch.Tensor) -> None:
        super().start_batch(input_ids)
        self.mask = self.chosen[self.rows[0]:self.rows[1]]

    def head_outputs(self, layer: int, z: torch.Tensor) -> None:
        if not self.mask.any():
            return
        where = accumulator(z.device)
        rows = z[self.mask.to(z.device)].to(where, torch.float64)  # [M, H, d]
        if self.sums is None:
            self.sums = (torch.zeros(self.shape, dtype=torch.float64, device=where),
                         torch.zeros(self.shape + self.shape[-1:], dtype=torch.float64, device=where))
        self.sums[0][layer] += rows.sum(0)
        self.sums[1][layer] += torch.einsum("mhd,mhe->hde", rows, rows)

    def finish(self) -> ScreenPart:
        P = self.n_samples
        if self.sums is None:
            total, outer = np.zeros(self.shape), np.zeros(self.shape + self.shape[-1:])
        else:
            total, outer = (t.cpu().numpy() for t in self.sums)
        mean = total / max(P, 1)
        W = outer - P * np.einsum("lhd,lhe->lhde", mean, mean)
        pr = participation_ratio(W, P)
        corrected = participation_ratio(W, P, corrected=True)
        heads = {"pr": pr, "pr_corrected": corrected,
                 "pr_samples": np.full(pr.shape, float(P))}
        return ScreenPart(heads=heads, metrics={"pr.mean": float(np.nanmean(pr)), "pr.samples": float(P)})
