"""PR lead: is a head's participation ratio elevated before it becomes an induction head?

For every head flagged induction at the final revision (largest token count):

- *PR-elevation rule*: the head's PR is elevated at revision r when it exceeds the
  median PR of all the model's heads at r by ``k_mad`` (default 3) robust standard
  deviations, ``PR > median_r + k_mad * 1.4826 * MAD_r`` (MAD_r the median absolute
  deviation across heads at r; where MAD_r = 0, any PR above the median). The
  elevation revision is the first revision from which this holds at ``persist``
  (default 2) consecutive revisions (fewer at the end of the series: all the
  remaining ones), so that a one-revision blip does not count. The rule is
  cross-sectional, so a drift of every head's PR over training does not count.
- *Crossing*: the first revision at which the head is flagged induction (its
  selectivity passes the induction threshold).
- *Lead ratio* (tokens): ``t_crossing / t_elevation``; > 1 when PR leads. A head
  whose PR is never elevated has no ratio and counts as a negative (PR did not lead).
- *Sign test* over heads (:func:`stats.hypotheses.sign_test`): positives are heads
  elevated strictly before crossing, negatives strictly after (or never), ties
  (same revision) dropped; H0: median lead ratio 1; one-sided, H1: PR leads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd

from emergence.contract import flag_column, selectivity_column
from stats.hypotheses import TestResult, sign_test


def elevation_threshold(heads: pd.DataFrame, column: str = "pr", k_mad: float = 3.0) -> pd.DataFrame:
    """Per revision: median PR, robust SD and the elevation threshold (revision, tokens, ...)."""
    rows = []
    for (rev, tok), g in heads.groupby(["revision", "tokens"], sort=False):
        v = g[column].to_numpy(float)
        v = v[np.isfinite(v)]
        if v.size == 0:
            continue
        med = float(np.median(v))
        sd = 1.4826 * float(np.median(np.abs(v - med)))
        rows.append((rev, float(tok), med, sd, med + k_mad * sd))
    frame = pd.DataFrame(rows, columns=["revision", "tokens", "median", "robust_sd", "threshold"])
    return frame.sort_values("tokens").reset_index(drop=True)


@dataclass
class HeadLead:
    layer: int
    head: int
    revision_elevated: Optional[str]
    tokens_elevated: Optional[float]
    revision_crossed: Optional[str]
    tokens_crossed: Optional[float]
    lead_ratio: Optional[float]
    sign: int  # +1 elevated before crossing, 0 same revision, -1 after or never

    def to_dict(self):
        return dict(self.__dict__)


@dataclass
class PRLead:
    model: str
    column: str
    k_mad: float
    heads: list
    test: TestResult
    persist: int = 2
    trajectories: pd.DataFrame = field(repr=False, default=None)
    thresholds: pd.DataFrame = field(repr=False, default=None)
    top: list = field(default_factory=list)

    @property
    def counts(self):
        s = [h.sign for h in self.heads]
        return {"before": s.count(1), "same": s.count(0), "after_or_never": s.count(-1)}

    @property
    def median_lead_ratio(self):
        r = [h.lead_ratio for h in self.heads if h.lead_ratio is not None and np.isfinite(h.lead_ratio)]
        return float(np.median(r)) if r else None

    def to_dict(self):
        return {
            "model": self.model,
            "column": self.column,
            "rule": f"PR > median + {self.k_mad} x 1.4826 MAD across heads at the revision, "
                    f"held for {self.persist} consecutive revisions",
            "heads": [h.to_dict() for h in self.heads],
            **self.counts,
            "median_lead_ratio": self.median_lead_ratio,
            "p_value": self.test.p_value if self.heads else None,
            "null": self.test.null,
        }


def first_persistent(flags, persist: int = 2) -> Optional[int]:
    """First index i with flags[i : i + persist] all true (truncated at the end)."""
    flags = np.asarray(flags, bool)
    for i in range(len(flags)):
        if flags[i : i + max(persist, 1)].all():
            return i
    return None


def pr_lead(heads: pd.DataFrame, model: str, column: str = "pr", k_mad: float = 3.0, induction_class: str = "induction",
            top_heads: int = 6, persist: int = 2) -> Optional[PRLead]:
    """PR-lead analysis of one model's per-head table (see module docstring)."""
    flag = flag_column(induction_class)
    h = heads[heads["model"] == model]
    if h.empty or column not in h.columns or flag not in h.columns or not h[column].notna().any():
        return None
    thr = elevation_threshold(h, column, k_mad)
    h = h.merge(thr[["revision", "threshold", "median"]], on="revision", how="left")
    h["elevated"] = (h[column] > h["threshold"]) | ((h["threshold"] == h["median"]) & (h[column] > h["median"]))
    order = {rev: i for i, rev in enumerate(thr["revision"])}
    h["order"] = h["revision"].map(order)
    final_tokens = h["tokens"].max()
    final = h[(h["tokens"] == final_tokens) & (h[flag] > 0)]
    sel_col = selectivity_column(induction_class)
    if sel_col in final.columns:
        final = final.sort_values(sel_col, ascending=False)
    leads = []
    for layer, head in final[["layer", "head"]].to_numpy().tolist():
        g = h[(h["layer"] == layer) & (h["head"] == head)].sort_values("order")
        i_el = first_persistent(g["elevated"].to_numpy(), persist)
        el = g.iloc[[i_el]] if i_el is not None else g.iloc[[]]
        cr = g[g[flag] > 0]
        e_rev = str(el["revision"].iloc[0]) if not el.empty else None
        e_tok = float(el["tokens"].iloc[0]) if not el.empty else None
        c_rev = str(cr["revision"].iloc[0])
        c_tok = float(cr["tokens"].iloc[0])
        if el.empty:
            sign = -1
        else:
            d = int(cr["order"].iloc[0]) - int(el["order"].iloc[0])
            sign = int(np.sign(d))
        ratio = c_tok / e_tok if (e_tok is not None and e_tok > 0 and c_tok > 0) else None
        leads.append(HeadLead(int(layer), int(head), e_rev, e_tok, c_rev, c_tok, ratio, sign))
    n_pos = sum(1 for x in leads if x.sign > 0)
    n_neg = sum(1 for x in leads if x.sign < 0)
    test = sign_test(n_pos, n_neg)
    top = [(x.layer, x.head) for x in leads[:top_heads]]
    traj = h[[tuple(v) in set(top) for v in h[["layer", "head"]].to_numpy().tolist()]][
        ["layer", "head", "revision", "tokens", column, "elevated", flag]
    ].sort_values(["layer", "head", "tokens"])
    return PRLead(model, column, k_mad, leads, test, persist, traj.reset_index(drop=True), thr, top)
