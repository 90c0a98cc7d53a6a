"""PR lead: is a head's participation ratio elevated at or before it becomes an induction head?

For every head flagged induction at the final revision (largest token count):

- *Elevation line*: the head's PR is elevated at revision r when it exceeds the
  median PR of all the model's heads at r by ``k_mad`` (default 3) robust standard
  deviations, ``PR > line_r = median_r + k_mad * 1.4826 * MAD_r`` (MAD_r the median
  absolute deviation across heads at r; where MAD_r = 0, any PR above the median).
  The line is cross-sectional, so a drift of every head's PR over training does not
  count.
- *Crossing* ``c``: the first revision at which the head is flagged induction (its
  selectivity passes the induction threshold).
- *Lead revision* ``e``: the earliest revision ``e <= c`` at which the head is
  elevated and from which its PR stays above ``line_e`` through ``c`` (a bump that falls
  back before the crossing is not a lead). ``e < c``: the PR leads (``sign = +1``, lead
  ratio ``t_c / t_e`` in tokens); ``e = c``: it rises at the crossing itself, "at or
  before" as the study states it (``sign = 0``, *same revision*); no such ``e``: elevated
  only after the crossing (held ``persist`` revisions) or never (``sign = -1``).
- *Not observable*: a head that crosses at the first revision cannot show a lead
  (``sign`` None, not a negative).
- *Sign test* over the observable heads (:func:`stats.hypotheses.sign_test`):
  positives lead, negatives are elevated after the crossing or never, same-revision
  heads are ties (dropped); H0: median lead ratio 1; one-sided, H1: PR leads. The
  study's own claim, "at or before", is the share ``at_or_before`` of observable
  heads with ``sign >= 0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd

from emergence.common.contract import flag_column, selectivity_column
from stats.config import DEFAULTS
from stats.hypotheses import TestResult, sign_test
from stats.results import Results

#: the PR-lead options' defaults (the schema's), the keyword defaults below
_PC = DEFAULTS.pr_lead


def elevation_threshold(heads: pd.DataFrame, column: str = _PC.column, k_mad: float = _PC.k_mad) -> pd.DataFrame:
    """Per revision: median PR, robust SD and the elevation threshold (revision, tokens, ...), finite PRs only."""
    h = heads[np.isfinite(heads[column].to_numpy(float))]
    keys = [h["revision"], h["tokens"].astype(float)]
    v = h[column].astype(float)
    by = v.groupby(keys, sort=False)
    frame = by.median().rename("median").to_frame()
    frame["robust_sd"] = 1.4826 * (v - by.transform("median")).abs().groupby(keys, sort=False).median()
    frame["threshold"] = frame["median"] + k_mad * frame["robust_sd"]
    return frame.reset_index().sort_values("tokens").reset_index(drop=True)


@dataclass
class HeadLead(Results):
    layer: int
    head: int
    revision_elevated: Optional[str]
    tokens_elevated: Optional[float]
    revision_crossed: Optional[str]
    tokens_crossed: Optional[float]
    lead_ratio: Optional[float]
    #: +1 elevated (persistently) before the crossing, 0 at the crossing revision, -1 after or never,
    #: None: not observable (crosses at the first revision)
    sign: Optional[int]
    outcome: str = field(init=False)

    def __post_init__(self):
        self.outcome = {1: "before", 0: "same revision", -1: "after or never", None: "not observable"}[self.sign]


@dataclass(kw_only=True)
class PRLead(Results):
    """The PR lead of one model's final induction heads (module docstring)."""

    EXCLUDE = ("k_mad", "test", "persist", "trajectories", "thresholds", "top")

    model: str
    column: str
    k_mad: float
    #: the elevation rule in words
    rule: str = field(init=False)
    heads: list
    #: heads by outcome: before, same revision, after or never, not observable
    before: int = field(init=False)
    same: int = field(init=False)
    after_or_never: int = field(init=False)
    not_observable: int = field(init=False)
    #: share of the observable heads whose PR rises at or before their crossing (the study's claim)
    at_or_before: Optional[float] = field(init=False)
    median_lead_ratio: Optional[float] = field(init=False)
    test: TestResult
    p_value: Optional[float] = field(init=False)
    null: str = field(init=False)
    persist: int = _PC.persist
    trajectories: pd.DataFrame = field(repr=False, default=None)
    thresholds: pd.DataFrame = field(repr=False, default=None)
    top: list = field(default_factory=list)

    def __post_init__(self):
        self.rule = (f"PR > median + {self.k_mad} x 1.4826 MAD across heads at the revision, from the lead revision "
                     f"on staying above the line it crossed there through the crossing (after the crossing: held for "
                     f"{self.persist} consecutive revisions)")
        signs = [h.sign for h in self.heads]
        self.before, self.same = signs.count(1), signs.count(0)
        self.after_or_never, self.not_observable = signs.count(-1), signs.count(None)
        observable = [x for x in signs if x is not None]
        self.at_or_before = sum(x >= 0 for x in observable) / len(observable) if observable else None
        r = [h.lead_ratio for h in self.heads if h.lead_ratio is not None and np.isfinite(h.lead_ratio)]
        self.median_lead_ratio = float(np.median(r)) if r else None
        self.p_value = self.test.p_value if self.heads else None
        self.null = self.test.null

    @property
    def counts(self) -> dict:
        return {"before": self.before, "same": self.same, "after_or_never": self.after_or_never,
                "not_observable": self.not_observable}

    def summary(self) -> str:
        share = "-" if self.at_or_before is None else f"{self.at_or_before:.0%}"
        return (f"{self.model}: {len(self.heads)} final induction heads, PR at or before the crossing in {share} "
                f"of the observable ({self.counts}); sign-test p = {self.p_value}")


def lead_revision(pr, line, elevated, c: int) -> Optional[int]:
    """The lead revision ``e <= c`` of one head (module docstring), or None."""
    pr, line = np.asarray(pr, float), np.asarray(line, float)
    for e in range(c + 1):
        if elevated[e] and np.all(pr[e:c + 1] > line[e]):
            return e
    return None


def first_persistent(flags, persist: int = 2) -> Optional[int]:
    """First index i with flags[i : i + persist] all true (truncated at the end)."""
    flags = np.asarray(flags, bool)
    for i in range(len(flags)):
        if flags[i : i + max(persist, 1)].all():
            return i
    return None


def pr_lead(heads: pd.DataFrame, model: str, column: str = _PC.column, k_mad: float = _PC.k_mad,
            induction_class: str = _PC.induction_class, top_heads: int = _PC.top_heads,
            persist: int = _PC.persist) -> Optional[PRLead]:
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
        g = h[(h["layer"] == layer) & (h["head"] == head)].sort_values("order").reset_index(drop=True)
        elevated = g["elevated"].to_numpy()
        c = int(np.flatnonzero(g[flag].to_numpy() > 0)[0])
        e = lead_revision(g[column].to_numpy(), g["threshold"].to_numpy(), elevated, c)
        if e is None:  # elevated only after the crossing (held `persist` revisions), or never
            after = first_persistent(elevated[c + 1:], persist)
            e, sign = (None if after is None else c + 1 + after), -1
        else:
            sign = int(np.sign(c - e))
        if c == 0:
            sign = None  # nothing screened before the crossing: a lead cannot be seen
        e_rev = None if e is None else str(g["revision"].iloc[e])
        e_tok = None if e is None else float(g["tokens"].iloc[e])
        c_rev, c_tok = str(g["revision"].iloc[c]), float(g["tokens"].iloc[c])
        ratio = c_tok / e_tok if (e_tok is not None and e_tok > 0 and c_tok > 0) else None
        leads.append(HeadLead(int(layer), int(head), e_rev, e_tok, c_rev, c_tok, ratio, sign))
    signs = [x.sign for x in leads]
    test = sign_test(signs.count(1), signs.count(-1))
    top = [(x.layer, x.head) for x in leads[:top_heads]]
    traj = h[[tuple(v) in set(top) for v in h[["layer", "head"]].to_numpy().tolist()]][
        ["layer", "head", "revision", "tokens", column, "elevated", flag]
    ].sort_values(["layer", "head", "tokens"])
    return PRLead(model=model, column=column, k_mad=k_mad, heads=leads, test=test, persist=persist,
                  trajectories=traj.reset_index(drop=True), thresholds=thr, top=top)


def pr_leads(results, cfg) -> list:
    """The :class:`PRLead` of every model of ``results`` with a per-head table holding PR values
    (``analysis.pr_lead``)."""
    if results.heads is None:
        return []
    pc = cfg.pr_lead
    leads = (pr_lead(results.heads, model, pc.column, pc.k_mad, pc.induction_class, pc.top_heads, pc.persist)
             for model in results.models)
    return [p for p in leads if p is not None]
