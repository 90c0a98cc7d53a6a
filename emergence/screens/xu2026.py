r"""The reference study's screen (Xu 2026, from its scripts), as streaming reducers.

Probe: ``corpus=xu2026`` (emergence/probes.py), ``[filler] A B [filler] A`` with the
pair at p, B at p+1 and the query at the last position q = T-1 (the second A).
Only row q of each layer's eager attention is read. With a[n, k] the attention of
sequence n's last query on key k (per layer and head), N sequences and V the valid
ones (B occurs exactly once in ``seq[:T-1]``):

=================  =============================  ================
class              targets K_c(n)                 sequences
=================  =============================  ================
induction          p_n + 1 (the B)                V
duplicate_token    p_n (the first A)              V
previous_token     T-2                            all
self               T-1                            all
local              T-3, T-4, T-5, T-6             all
bos                0 (a filler token: no BOS)     all
=================  =============================  ================

.. math::

    m_c = \frac{1}{|S_c|} \sum_{n \in S_c} \frac{1}{|K_c|} \sum_{k \in K_c(n)} a[n, k],
    \qquad
    b = \frac{1}{N} \sum_n \frac{1}{50} \sum_{k \in \mathcal B} a[n, k],
    \qquad
    S_c = \frac{m_c}{\max(b, 10^{-8})}

with :math:`|S_c| := \max(|V|, 1)` for induction and duplicate (the study's
convention: no valid sequence gives 0). The baseline set :math:`\mathcal B` is 50
distinct positions drawn once (:func:`baseline_positions`, ``RandomState(0)``) from
1..T-2 avoiding 0 and T-6..T-1: the same for every sequence, head and revision,
and it may hold p or p+1. Key 0 is a target of ``bos`` only and never in the
baseline. A uniform head over the T keys scores 1.

The table is the study's own, for its six classes (:data:`STUDY_CLASSES`). Any other
registered head class (:mod:`emergence.head_classes`) is measured the same way from its
own targets at the query q = T-1 (its key-0 policy applied): K_c(n) = its target keys
in row T-1 of sequence n, S_c the sequences with at least one, over the same baseline.

Participation ratio (:class:`ExpEntropyPRReducer`): Z_h [n x d_head] is the head's
slice of the output-projection input at q = T-1 over the first n probe sequences
(the study: 500), uncentred; with s_i its singular values (from the eigenvalues of
the float64 Gram matrix Z^T Z, accumulated batch by batch),

.. math::

    p_i = \frac{s_i^2}{\max(\sum_j s_j^2, 10^{-12})}, \qquad
    \mathrm{PR} = \exp\Big(-\sum_i p_i \log(p_i + 10^{-12})\Big) \in [1, \min(n, d_{head})].

Continuous metric (:class:`LastPositionLossReducer`): cross-entropy, top-1 and top-5
accuracy and the mean logit of B at q = T-1 over all N sequences (the study's
ablation metrics), logged as ``induction_loss``, ``induction_accuracy``,
``induction_top5``, ``induction_logit_b``.
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np
import torch

from emergence import EmergenceError, head_classes
from emergence.contract import FIRST_TOKEN_COLUMN, selectivity_column
from emergence.screens.base import Reducer, ScreenPart
from emergence.screens.selectivity import class_masks

#: The classes whose targets the study defines itself (the table above).
STUDY_CLASSES = ("induction", "previous_token", "duplicate_token", "bos", "self", "local")

#: Keys avoided by the baseline, as offsets from T: 0 is handled apart; T-6..T-1.
LOCAL_OFFSETS = (3, 4, 5, 6)


def baseline_positions(seq_len: int, count: int = 50, seed: int = 0) -> np.ndarray:
    """The study's baseline keys: repeat ``randint(1, T-1)`` on ``RandomState(seed)`` and
    keep a draw when it is new and not in {0, T-6, .., T-1}, until ``count`` are kept."""
    T = seq_len
    avoid = {0, T - 1, T - 2, *(T - d for d in LOCAL_OFFSETS)}
    available = T - 7
    if count < 1 or count > available:
        raise EmergenceError(f"screen.xu2026.baseline_positions={count} cannot be drawn at seq_len={T}: "
                             f"valid 1..{available} (keys 1..T-7)")
    rng = np.random.RandomState(seed)
    picked: List[int] = []
    while len(picked) < count:
        k = int(rng.randint(1, T - 1))
        if k not in avoid and k not in picked:
            picked.append(k)
    return np.array(picked, dtype=np.int64)


def probe_layout(probe):
    if probe.layout is None:
        raise EmergenceError(f"screen.recipe=xu2026 needs the pair positions of corpus=xu2026; got corpus "
                             f"{probe.kind!r}")
    return probe.layout


class _Rows(Reducer):
    """Tracks which probe rows the current batch holds."""

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.offset = 0
        self.rows = (0, 0)

    def start_batch(self, input_ids: torch.Tensor) -> None:
        self.rows = (self.offset, self.offset + input_ids.shape[0])
        self.offset += input_ids.shape[0]


class Xu2026SelectivityReducer(_Rows):
    """Sums, per layer and head, the last query's attention on each class's targets and
    on the baseline keys (float64); ``finish`` forms S_c."""

    needs_attention = True

    def __init__(self, baseline_count: int = 50, baseline_seed: int = 0, floor: float = 1e-8,
                 settings: Optional[dict] = None):
        self.baseline_count = baseline_count
        self.baseline_seed = baseline_seed
        self.floor = floor
        #: Options of the other registered classes' targets (``local_window``).
        self.settings = dict(settings or {})

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.layout = probe_layout(probe)
        T = probe.seq_len
        self.baseline = torch.from_numpy(baseline_positions(T, self.baseline_count, self.baseline_seed))
        self.local = torch.tensor([T - d for d in LOCAL_OFFSETS])
        shape = (adapter.n_layers, adapter.n_heads)
        self.sums = {c: np.zeros(shape) for c in STUDY_CLASSES}
        self.base_sum = np.zeros(shape)
        self.n_all = 0
        self.n_valid = 0
        # The other registered classes: their own targets in the last row.
        self.extra = [c for c in head_classes.classes() if c.name not in STUDY_CLASSES]
        self.extra_sum = np.zeros(shape + (len(self.extra),))
        self.extra_n = np.zeros(len(self.extra))

    def start_batch(self, input_ids: torch.Tensor) -> None:
        super().start_batch(input_ids)
        rows = self.layout.rows(*self.rows)
        self.valid = rows.valid
        self.pair = rows.position[rows.valid]
        self.n_all += input_ids.shape[0]
        self.n_valid += int(rows.valid.sum())
        if self.extra:
            B = input_ids.shape[0]
            masks, _ = class_masks(input_ids, self.extra, self.settings)
            last = masks[:, :, -1, :].expand(-1, B, -1).float()  # [C, B, T]: targets of the last query
            count = last.sum(-1, keepdim=True)
            self.extra_weights = torch.where(count > 0, last / count.clamp(min=1), torch.zeros_like(last))
            self.extra_n += (count[..., 0] > 0).sum(-1).numpy()

    def attention(self, layer: int, weights: torch.Tensor) -> None:
        a = weights[:, :, -1, :].double()  # [B, H, T]: the last query only
        T = a.shape[-1]
        add = {
            "previous_token": a[..., T - 2],
            "self": a[..., T - 1],
            "bos": a[..., 0],
            "local": a[..., self.local.to(a.device)].mean(-1),
        }
        for c, v in add.items():
            self.sums[c][layer] += v.sum(0).cpu().numpy()
        self.base_sum[layer] += a[..., self.baseline.to(a.device)].mean(-1).sum(0).cpu().numpy()
        if len(self.pair):
            v = a[self.valid.to(a.device)]  # [V, H, T]
            p = self.pair.to(a.device)[:, None, None].expand(-1, v.shape[1], 1)
            self.sums["duplicate_token"][layer] += v.gather(-1, p)[..., 0].sum(0).cpu().numpy()
            self.sums["induction"][layer] += v.gather(-1, p + 1)[..., 0].sum(0).cpu().numpy()
        if self.extra:
            w = self.extra_weights.to(a.device, a.dtype)
            self.extra_sum[layer] += torch.einsum("bhk,cbk->hc", a, w).cpu().numpy()

    def finish(self) -> ScreenPart:
        n_all, n_valid = max(self.n_all, 1), max(self.n_valid, 1)
        baseline = np.maximum(self.base_sum / n_all, self.floor)
        heads = {}
        for c in STUDY_CLASSES:
            n = n_valid if c in ("induction", "duplicate_token") else n_all
            heads[selectivity_column(c)] = (self.sums[c] / n) / baseline
        for i, c in enumerate(self.extra):
            heads[selectivity_column(c.name)] = (self.extra_sum[..., i] / max(self.extra_n[i], 1)) / baseline
        heads[FIRST_TOKEN_COLUMN] = self.sums["bos"] / n_all
        return ScreenPart(heads=heads, metrics={"xu2026.valid_sequences": float(self.n_valid),
                                                "xu2026.baseline_attention": float(np.mean(self.base_sum / n_all))})


def exp_entropy_pr(gram: np.ndarray) -> np.ndarray:
    """PR = exp(entropy of the normalised squared singular values), from Gram matrices
    Z^T Z [..., d, d] (their eigenvalues are the squared singular values of Z)."""
    s2 = np.clip(np.linalg.eigvalsh(gram), 0.0, None)
    p = s2 / np.maximum(s2.sum(-1, keepdims=True), 1e-12)
    return np.exp(-(p * np.log(p + 1e-12)).sum(-1))


class ExpEntropyPRReducer(_Rows):
    """The study's participation ratio at the last position over the first n sequences."""

    needs_head_outputs = True

    def __init__(self, n_sequences: int = 500):
        if n_sequences < 1:
            raise EmergenceError(f"screen.xu2026.pr_sequences={n_sequences} must be >= 1")
        self.n_sequences = n_sequences

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.used = min(self.n_sequences, probe.n_sequences)
        d = adapter.head_dim
        self.gram = np.zeros((adapter.n_layers, adapter.n_heads, d, d))

    def head_outputs(self, layer: int, z: torch.Tensor) -> None:
        start, stop = self.rows
        take = max(0, min(stop, self.used) - start)
        if take == 0:
            return
        x = z[:take, -1].double()  # [take, H, d]
        self.gram[layer] += torch.einsum("nhd,nhe->hde", x, x).cpu().numpy()

    def finish(self) -> ScreenPart:
        pr = exp_entropy_pr(self.gram)
        return ScreenPart(heads={"pr": pr, "pr_samples": np.full(pr.shape, float(self.used))},
                          metrics={"pr.mean": float(np.mean(pr)), "pr.samples": float(self.used)})


class LastPositionLossReducer(_Rows):
    """Cross-entropy, top-1/top-5 accuracy and the logit of B at the last position."""

    needs_hidden = True

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.layout = probe_layout(probe)
        self.loss = self.top1 = self.top5 = self.logit = 0.0
        self.count = 0

    def hidden(self, last_hidden: torch.Tensor, model: torch.nn.Module) -> None:
        logits = model.get_output_embeddings()(last_hidden[:, -1]).float()
        b = self.layout.target[self.rows[0]:self.rows[1]].to(logits.device)
        self.loss += float(torch.nn.functional.cross_entropy(logits, b, reduction="sum"))
        self.top1 += int((logits.argmax(-1) == b).sum())
        self.top5 += int((logits.topk(min(5, logits.shape[-1]), -1).indices == b[:, None]).any(-1).sum())
        self.logit += float(logits.gather(-1, b[:, None]).sum())
        self.count += int(b.shape[0])

    def finish(self) -> ScreenPart:
        n = max(self.count, 1)
        return ScreenPart(metrics={"induction_loss": self.loss / n, "induction_accuracy": self.top1 / n,
                                   "induction_top5": self.top5 / n, "induction_logit_b": self.logit / n,
                                   "induction_targets": float(self.count)})
