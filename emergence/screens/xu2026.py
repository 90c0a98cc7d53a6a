r"""The reference study's screen (Xu 2026, from its scripts), as streaming reducers.

Probe: ``corpus=xu2026`` (emergence/probes.py), ``[filler] A B [filler] A`` with the
pair at p, B at p+1 and the query at the last position q = T-1 (the second A).
Only row q of each layer's attention is read (and only that row is computed:
:mod:`emergence.screens.attention`). With a[n, k] the attention of
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
registered head class (:mod:`emergence.common.head_classes`) is measured the same way from its
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

from typing import Dict, List, Optional

import numpy as np
import torch

from emergence import EmergenceError
from emergence.common import head_classes
from emergence.common.contract import FIRST_TOKEN_COLUMN, selectivity_column
from emergence.screens.base import RowsReducer, ScreenPart, accumulator
from emergence.screens.selectivity import class_masks

#: The classes whose targets the study defines itself (the table above).
STUDY_CLASSES = ("induction", "previous_token", "duplicate_token", "bos", "self", "local")

#: Keys avoided by the baseline, as offsets from T: 0 is handled apart; T-6..T-1.
LOCAL_OFFSETS = (3, 4, 5, 6)
#: Keys no baseline draw takes: 0 and T-6..T-1 (the baseline keys lie in 1..T-7).
BASELINE_EXCLUDED = 7


def baseline_positions(seq_len: int, count: int = 50, seed: int = 0) -> np.ndarray:
    """The study's baseline keys: repeat ``randint(1, T-1)`` on ``RandomState(seed)`` and
    keep a draw when it is new and not in {0, T-6, .., T-1}, until ``count`` are kept."""
    T = seq_len
    avoid = {0, T - 1, T - 2, *(T - d for d in LOCAL_OFFSETS)}
    available = T - BASELINE_EXCLUDED
    if count < 1 or count > available:
        raise EmergenceError(f"screen.xu2026.baseline_positions={count} cannot be drawn at seq_len={T}: "
                             f"valid 1..{available} (keys 1..T-{BASELINE_EXCLUDED})")
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


class Xu2026SelectivityReducer(RowsReducer):
    """Sums, per layer and head, the last query's attention on each class's targets and
    on the baseline keys (float64, on the attention's device); ``finish`` forms S_c. Only
    the last query's row is computed in the pass (``attention_rows = (-1,)``)."""

    needs_attention = True
    attention_rows = (-1,)

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
        self.shape = (adapter.n_layers, adapter.n_heads)
        self.n_all = 0
        self.n_valid = 0
        # The other registered classes: their own targets in the last row.
        self.extra = [c for c in head_classes.classes() if c.name not in STUDY_CLASSES]
        self.extra_n = np.zeros(len(self.extra))
        #: [L, H, classes + baseline] and [L, H, extra classes] float64 sums, made at the first layer.
        self.acc = self.extra_acc = None

    def start_batch(self, input_ids: torch.Tensor) -> None:
        super().start_batch(input_ids)
        rows = self.layout.rows(*self.rows)
        self.valid = rows.valid
        self.pair = rows.position[rows.valid]
        self.n_all += input_ids.shape[0]
        self.n_valid += int(rows.valid.sum())
        self.on_device = None  # (valid, pair, baseline, local, extra weights) on the attention's device
        if self.extra:
            B = input_ids.shape[0]
            masks, _ = class_masks(input_ids, self.extra, self.settings)
            last = masks[:, :, -1, :].expand(-1, B, -1).float()  # [C, B, T]: targets of the last query
            count = last.sum(-1, keepdim=True)
            self.extra_weights = torch.where(count > 0, last / count.clamp(min=1), torch.zeros_like(last))
            self.extra_n += (count[..., 0] > 0).sum(-1).numpy()

    def _prepare(self, device) -> tuple:
        if self.on_device is None:
            if self.acc is None:
                self.acc = torch.zeros(self.shape + (len(STUDY_CLASSES) + 1,), dtype=torch.float64, device=device)
                self.extra_acc = torch.zeros(self.shape + (len(self.extra),), dtype=torch.float64, device=device)
            extra = self.extra_weights.to(device, torch.float64) if self.extra else None
            self.on_device = (self.valid.to(device), self.pair.to(device), self.baseline.to(device),
                              self.local.to(device), extra)
        return self.on_device

    def attention(self, layer: int, weights: torch.Tensor) -> None:
        a = weights[:, :, -1, :].to(accumulator(weights.device), torch.float64)  # [B, H, T]: the last query
        valid, pair, baseline, local, extra = self._prepare(a.device)
        T = a.shape[-1]
        add = {
            "previous_token": a[..., T - 2].sum(0),
            "self": a[..., T - 1].sum(0),
            "bos": a[..., 0].sum(0),
            "local": a[..., local].mean(-1).sum(0),
        }
        if len(pair):
            v = a[valid]  # [V, H, T]
            p = pair[:, None, None].expand(-1, v.shape[1], 1)
            add["duplicate_token"] = v.gather(-1, p)[..., 0].sum(0)
            add["induction"] = v.gather(-1, p + 1)[..., 0].sum(0)
        zero = torch.zeros(a.shape[1], dtype=a.dtype, device=a.device)
        columns = [add.get(c, zero) for c in STUDY_CLASSES] + [a[..., baseline].mean(-1).sum(0)]
        self.acc[layer] += torch.stack(columns, -1)
        if self.extra:
            self.extra_acc[layer] += torch.einsum("bhk,cbk->hc", a, extra)

    def finish(self) -> ScreenPart:
        acc = np.zeros(self.shape + (len(STUDY_CLASSES) + 1,)) if self.acc is None else self.acc.cpu().numpy()
        extra_sum = np.zeros(self.shape + (len(self.extra),)) if self.acc is None else self.extra_acc.cpu().numpy()
        base_sum = acc[..., -1]
        n_all, n_valid = max(self.n_all, 1), max(self.n_valid, 1)
        baseline = np.maximum(base_sum / n_all, self.floor)
        heads = {}
        for i, c in enumerate(STUDY_CLASSES):
            n = n_valid if c in ("induction", "duplicate_token") else n_all
            heads[selectivity_column(c)] = (acc[..., i] / n) / baseline
        for i, c in enumerate(self.extra):
            heads[selectivity_column(c.name)] = (extra_sum[..., i] / max(self.extra_n[i], 1)) / baseline
        heads[FIRST_TOKEN_COLUMN] = acc[..., STUDY_CLASSES.index("bos")] / n_all
        return ScreenPart(heads=heads, metrics={"xu2026.valid_sequences": float(self.n_valid),
                                                "xu2026.baseline_attention": float(np.mean(base_sum / n_all))})


def exp_entropy_pr(gram: np.ndarray) -> np.ndarray:
    """PR = exp(entropy of the normalised squared singular values), from Gram matrices
    Z^T Z [..., d, d] (their eigenvalues are the squared singular values of Z)."""
    s2 = np.clip(np.linalg.eigvalsh(gram), 0.0, None)
    p = s2 / np.maximum(s2.sum(-1, keepdims=True), 1e-12)
    return np.exp(-(p * np.log(p + 1e-12)).sum(-1))


class ExpEntropyPRReducer(RowsReducer):
    """The study's participation ratio at the last position over the first n sequences."""

    needs_head_outputs = True

    def __init__(self, n_sequences: int = 500):
        self.n_sequences = n_sequences

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.used = min(self.n_sequences, probe.n_sequences)
        self.shape = (adapter.n_layers, adapter.n_heads, adapter.head_dim, adapter.head_dim)
        self.gram = None  # float64 on the head outputs' device, made at the first layer

    def head_outputs(self, layer: int, z: torch.Tensor) -> None:
        start, stop = self.rows
        take = max(0, min(stop, self.used) - start)
        if take == 0:
            return
        x = z[:take, -1].to(accumulator(z.device), torch.float64)  # [take, H, d]
        if self.gram is None:
            self.gram = torch.zeros(self.shape, dtype=torch.float64, device=x.device)
        self.gram[layer] += torch.einsum("nhd,nhe->hde", x, x)

    def finish(self) -> ScreenPart:
        pr = exp_entropy_pr(np.zeros(self.shape) if self.gram is None else self.gram.cpu().numpy())
        return ScreenPart(heads={"pr": pr, "pr_samples": np.full(pr.shape, float(self.used))},
                          metrics={"pr.mean": float(np.mean(pr)), "pr.samples": float(self.used)})


#: The last-position metrics of the study's ablation, and their run-metric names.
LAST_POSITION_METRICS = {"loss": "induction_loss", "top1": "induction_accuracy", "top5": "induction_top5",
                         "logit_b": "induction_logit_b"}


class LastPositionLossReducer(RowsReducer):
    """Cross-entropy, top-1/top-5 accuracy and the logit of B at the last position.

    Per-sequence values are kept (on the logits' device until ``finish``), so the metrics of
    any first n sequences are known afterwards (:meth:`first`): the screen's pass serves as
    the ablation's clean pass."""

    needs_hidden = True

    def begin(self, adapter, probe) -> None:
        super().begin(adapter, probe)
        self.layout = probe_layout(probe)
        self.parts: List[torch.Tensor] = []  # per batch [4, B]: loss, top1, top5, logit of B
        self.values = np.zeros((4, 0))

    def hidden(self, last_hidden: torch.Tensor, model: torch.nn.Module) -> None:
        logits = model.get_output_embeddings()(last_hidden[:, -1]).float()
        b = self.layout.target[self.rows[0]:self.rows[1]].to(logits.device)
        loss = torch.nn.functional.cross_entropy(logits, b, reduction="none")
        top1 = logits.argmax(-1) == b
        top5 = (logits.topk(min(5, logits.shape[-1]), -1).indices == b[:, None]).any(-1)
        logit = logits.gather(-1, b[:, None])[:, 0]
        self.parts.append(torch.stack([loss, top1.float(), top5.float(), logit]).double())

    def first(self, n: Optional[int] = None) -> Dict[str, float]:
        """``loss``, ``top1``, ``top5``, ``logit_b`` over the first ``n`` sequences (all: None)."""
        v = self.values[:, :n]
        count = max(v.shape[1], 1)
        return {k: float(v[i].sum() / count) for i, k in enumerate(LAST_POSITION_METRICS)}

    def finish(self) -> ScreenPart:
        self.values = torch.cat([p.cpu() for p in self.parts], 1).numpy() if self.parts else np.zeros((4, 0))
        metrics = {LAST_POSITION_METRICS[k]: v for k, v in self.first().items()}
        metrics["induction_targets"] = float(self.values.shape[1])
        return ScreenPart(metrics=metrics)
