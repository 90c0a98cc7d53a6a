"""The study's other findings: layer floor, per-layer onset, circuit convergence.

Layer floor (F1). For one model and class c (BOS), ``k`` = head-revision pairs
flagged c in the floor layers (default L0, L1) over all revisions, of
``N = heads in those layers x revisions``. Reported: ``k``, the exact one-sided
95 % upper bound on the rate (Clopper-Pearson; ``1 - 0.05^(1/N)`` when k = 0) and
the exact test of H0 rate >= ``floor_rate``. The N head-revision pairs are not
independent (the same head at ten revisions), so the bound over *distinct heads*
(a head counts once, positive if flagged at any revision) is reported as well:
the conservative reading.

Per-layer onset. A layer's onset is the first revision at which it holds at least
``onset_min_count`` heads of the class *and keeps them* at the next
``onset_persist - 1`` revisions (fewer at the end of the series): an onset carried
by a head that is gone at the next revision is no onset (never: +inf). Reported
per model: the onset of every layer, the layers that gain heads first and last,
and the study's claim, "BOS heads appear first in the middle of the network and
spread outwards; the layers just above the floor are the last to gain them", as
one-sided permutation tests over the layers outside the floor (H0: onsets
exchangeable across layers), on log10 onset tokens (never: latest):

- *onset against depth*, where the claim is: over the layers from just above the
  floor up to the middle layer ``(L - 1) / 2``, Spearman's rho between depth and
  onset (H1: rho < 0, the deeper of them earlier: the onset spreads down from the
  middle towards the floor);
- *just above the floor last*: the mean onset rank of the ``just_above_floor``
  layers above the floor (L2, L3) against the other layers (H1: later);

and a verdict: ``yes`` when both reject at alpha, ``mixed`` when one does, ``no``
when neither (``n/a`` with fewer than three layers with an onset). The symmetric
*middle out* statistic, rho between a layer's distance from the middle and its
onset over all layers outside the floor (H1: rho > 0), is reported as evidence:
it also asks the upper layers to be late, which the claim does not stress.

Circuit convergence (F4). ``S_final`` = the heads flagged (induction) at the final
revision (largest token count). At each revision r, recall(r) = |S_r n S_final| /
|S_final|. Reported: the recall curve, the first revision where recall >=
``recall_level`` (2/3) and its tokens and percentage of training (tokens over the
final revision's tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd

from emergence.common.contract import flag_column, selectivity_column
from stats.config import DEFAULTS
from stats.hypotheses import TestResult, clopper_pearson_upper, exceedance_p, layer_floor_test, permutation_spearman
from stats.pr_lead import first_persistent
from stats.results import HEAD_CLASS_KEY, Results

#: the findings options' defaults (the schema's), the keyword defaults below
_FC = DEFAULTS.findings


def class_layer_counts(results, head_class: str, model: Optional[str] = None) -> pd.DataFrame:
    """Per-layer counts of ``head_class`` (model, revision, tokens, layer, k, n), from the
    per-layer metrics, else from the per-head table."""
    lay = results.layers
    df = lay[lay["class"] == head_class] if not lay.empty else lay
    flag = flag_column(head_class)
    if df.empty and results.heads is not None and flag in results.heads.columns:
        df = results.heads.groupby(["model", "revision", "tokens", "layer"], as_index=False).agg(
            k=(flag, "sum"), n=("head", "size"))
    columns = ["model", "revision", "tokens", "layer", "k", "n"]
    df = df[columns] if not df.empty else pd.DataFrame(columns=columns)
    if model is not None:
        df = df[df["model"] == model]
    return df.astype({"layer": int}).sort_values(["tokens", "layer"]).reset_index(drop=True) if not df.empty else df


@dataclass
class LayerFloor(Results):
    """The floor claim of one model: no heads of the class in the floor layers (module docstring)."""

    RENAME = {"head_class": "class", "k": "flagged_head_revisions", "N": "head_revisions",
              "heads_ever": "heads_ever_flagged"}
    EXCLUDE = ("test",)

    model: str
    head_class: str
    layers: list
    k: int
    N: int
    n_revisions: int
    n_heads: int
    heads_ever: int
    rate: Optional[float] = field(init=False)
    upper_bound: float
    upper_bound_heads: float
    test: TestResult
    level: float = 0.95
    holds: bool = field(init=False)
    p_value: float = field(init=False)
    null: str = field(init=False)

    def __post_init__(self):
        self.rate = self.k / self.N if self.N else None
        self.holds = self.k == 0
        self.p_value, self.null = self.test.p_value, self.test.null

    def summary(self) -> str:
        return (f"{self.model}: {self.k} of {self.N} {self.head_class} head-revisions in layers {self.layers} "
                f"({self.level:.0%} bound on the rate {self.upper_bound:.3g}); p = {self.p_value:.3g}")


def layer_floor(counts: pd.DataFrame, model: str, head_class: str = _FC.floor_class, floor_layers=tuple(_FC.floor_layers),
                rate0: float = _FC.floor_rate, alpha: float = DEFAULTS.alpha,
                heads: Optional[pd.DataFrame] = None) -> Optional[LayerFloor]:
    """Layer-floor summary of one model from its per-layer counts (see module docstring)."""
    floor_layers = [int(v) for v in floor_layers]
    df = counts[counts["layer"].isin(floor_layers)]
    if df.empty:
        return None
    k = int(df["k"].sum())
    N = int(df["n"].sum())
    n_rev = int(df["revision"].nunique())
    n_heads = int(df.groupby("layer")["n"].max().sum())
    flag = flag_column(head_class)
    if heads is not None and flag in heads.columns:
        h = heads[heads["layer"].isin(floor_layers)]
        if "model" in h.columns:  # per-head rows of every model may be passed: count this model's only
            h = h[h["model"] == model]
        heads_ever = int((h.groupby(["layer", "head"])[flag].max() > 0).sum())
    else:
        # without per-head rows, bound by the largest per-revision count (a lower bound on distinct heads)
        heads_ever = int(df.groupby("revision")["k"].sum().max()) if k else 0
    test = layer_floor_test(k, N, rate0, alpha)
    return LayerFloor(model, head_class, floor_layers, k, N, n_rev, n_heads, heads_ever,
                      clopper_pearson_upper(k, N, alpha), clopper_pearson_upper(heads_ever, n_heads, alpha), test, 1 - alpha)


@dataclass(kw_only=True)
class LayerOnset(Results):
    """Per-layer onsets of one model and the tests of the middle-first claim (module docstring)."""

    RENAME = {"head_class": "class", "just_above": "just_above_floor", "persist": "onset_persist",
              "floor_layers": "floor_layers_excluded"}
    EXCLUDE = ("onset", "test", "last_test", "alpha", "depth_test")

    model: str
    head_class: str
    onset: dict  # layer -> tokens (None: never)
    onset_tokens: dict = field(init=False)
    first_layers: list
    last_layers: list
    never_layers: list
    #: the middle-out test (onset against distance from the middle)
    test: Optional[TestResult]
    middle_out_rho: Optional[float] = field(init=False)
    middle_out_p_value: Optional[float] = field(init=False)
    #: the one-sided test of onset against depth below the middle (deeper earlier)
    depth_test: Optional[TestResult] = None
    depth_rho: Optional[float] = field(init=False)
    depth_p_value: Optional[float] = field(init=False)
    just_above: list = field(default_factory=list)
    #: the one-sided test that the layers just above the floor gain heads last
    last_test: Optional[TestResult] = None
    just_above_last_p_value: Optional[float] = field(init=False)
    alpha: float = 0.05
    #: ``yes`` / ``mixed`` / ``no`` for "middle first, the layers just above the floor last"
    verdict: str = field(init=False)
    persist: int = 1
    floor_layers: list = field(default_factory=list)

    def __post_init__(self):
        self.onset_tokens = {str(k): v for k, v in self.onset.items()}
        self.middle_out_rho = None if self.test is None else self.test.statistic
        self.middle_out_p_value = None if self.test is None else self.test.p_value
        self.depth_rho = None if self.depth_test is None else -self.depth_test.statistic
        self.depth_p_value = None if self.depth_test is None else self.depth_test.p_value
        self.just_above_last_p_value = None if self.last_test is None else self.last_test.p_value
        if self.depth_test is None or self.last_test is None:
            self.verdict = "n/a"
        else:
            hits = (self.depth_test.p_value <= self.alpha) + (self.last_test.p_value <= self.alpha)
            self.verdict = ("no", "mixed", "yes")[hits]

    def summary(self) -> str:
        return (f"{self.model}: middle first {self.verdict}; first in layers {self.first_layers}, last in "
                f"{self.last_layers}, never in {self.never_layers}")


def _later_rank_test(vals, group: np.ndarray, n_perm: int, rng) -> TestResult:
    """One-sided permutation test that the layers in ``group`` have later onsets (mean rank)."""
    from scipy.stats import rankdata

    r = rankdata(vals)
    t = float(r[group].mean())
    perms = rng.permuted(np.tile(r, (n_perm, 1)), axis=1)
    t_star = perms[:, group].mean(1)
    p = exceedance_p(t_star, t, n_perm)
    return TestResult("just_above_floor_last_permutation", "onsets exchangeable across layers", t, p, n_perm)


def layer_onset(counts: pd.DataFrame, model: str, head_class: str = _FC.onset_class, min_count: int = _FC.onset_min_count,
                floor_layers=tuple(_FC.floor_layers), n_perm: int = _FC.n_perm, rng: Optional[np.random.Generator] = None,
                n_layers: Optional[int] = None, persist: int = 1, just_above_floor: int = _FC.just_above_floor,
                alpha: float = DEFAULTS.alpha) -> Optional[LayerOnset]:
    """Per-layer onset and the tests of the middle-first claim of one model (see module docstring)."""
    if counts.empty:
        return None
    rng = np.random.default_rng(0) if rng is None else rng
    L = int(n_layers if n_layers is not None else counts["layer"].max() + 1)
    onset = {}
    for layer in range(L):
        d = counts[counts["layer"] == layer].sort_values("tokens")
        i = first_persistent(d["k"].to_numpy() >= min_count, persist)
        onset[layer] = float(d["tokens"].iloc[i]) if i is not None else None
    finite = {l: t for l, t in onset.items() if t is not None}
    never = [l for l, t in onset.items() if t is None]
    first = sorted(l for l, t in finite.items() if t == min(finite.values())) if finite else []
    eligible = [l for l in range(L) if l not in set(int(v) for v in floor_layers)]
    elig_finite = {l: finite[l] for l in eligible if l in finite}
    last = sorted(l for l, t in elig_finite.items() if t == max(elig_finite.values())) if elig_finite else []
    test = last_test = depth_test = None
    top = max([int(v) for v in floor_layers], default=-1)
    just = [l for l in range(top + 1, top + 1 + just_above_floor) if l in eligible]
    if len(eligible) >= 3 and len(elig_finite) >= 3:
        mid = (L - 1) / 2
        dist = np.array([abs(l - mid) for l in eligible])
        vals = np.array([onset[l] if onset[l] is not None else np.inf for l in eligible])
        vals = np.where(np.isfinite(vals), np.log10(np.where(np.isfinite(vals), vals, 1.0)), np.inf)
        test = permutation_spearman(dist, vals, n_perm, rng)
        if just and len(just) < len(eligible):
            last_test = _later_rank_test(vals, np.isin(eligible, just), n_perm, rng)
        lower = np.array([l <= mid for l in eligible])
        if lower.sum() >= 3:  # rho(-depth, onset) > 0: the deeper lower layers gain heads earlier
            depth_test = permutation_spearman(-np.asarray(eligible, float)[lower], vals[lower], n_perm, rng)
    return LayerOnset(model=model, head_class=head_class, onset=onset, first_layers=first, last_layers=last,
                      never_layers=never, test=test, floor_layers=[int(v) for v in floor_layers], last_test=last_test,
                      just_above=just, persist=int(persist), alpha=float(alpha), depth_test=depth_test)


@dataclass(kw_only=True)
class Convergence(Results):
    """Recall of one model's final circuit at each revision (module docstring)."""

    RENAME = HEAD_CLASS_KEY
    EXCLUDE = ("table",)

    model: str
    head_class: str
    #: the selectivity threshold that defines the circuit (None: the analysis threshold's flags)
    threshold: Optional[float] = None
    n_final: int
    level: float
    revision_at_level: Optional[str]
    tokens_at_level: Optional[float]
    pct_training: Optional[float]
    table: pd.DataFrame  # revision, tokens, recall, n_found, n_final
    recall: list = field(init=False)

    def __post_init__(self):
        self.recall = [{"revision": r.revision, "tokens": float(r.tokens), "recall": float(r.recall)}
                       for r in self.table.itertuples()]

    def recall_at(self, revision: str) -> Optional[float]:
        row = self.table[self.table["revision"] == revision]
        return None if row.empty else float(row["recall"].iloc[0])

    def summary(self) -> str:
        at = "never" if self.revision_at_level is None else f"at {self.revision_at_level} ({self.pct_training:.2f}% of training)"
        return f"{self.model}: recall {self.level:.2f} of the final {self.n_final}-head {self.head_class} circuit {at}"


def circuit_convergence(heads: pd.DataFrame, model: str, head_class: str = _FC.convergence_class,
                        level: float = _FC.recall_level, threshold: Optional[float] = None) -> Optional[Convergence]:
    """Recall of the final circuit at each revision (see module docstring); with ``threshold`` the
    circuit is the heads with ``selectivity >= threshold`` instead of the table's flags."""
    col = flag_column(head_class)
    h = heads[heads["model"] == model]
    if threshold is not None:
        sel = selectivity_column(head_class)
        if sel not in h.columns:
            return None
        h = h.assign(**{col: (h[sel].fillna(0.0) >= threshold).astype(int)})
    if h.empty or col not in h.columns:
        return None
    final_tokens = float(h["tokens"].max())
    def flagged(g) -> set:
        return set(map(tuple, g.loc[g[col] > 0, ["layer", "head"]].to_numpy().tolist()))

    s_final = flagged(h[h["tokens"] == final_tokens])
    rows = []
    for (rev, tok), g in h.groupby(["revision", "tokens"], sort=False):
        found = len(flagged(g) & s_final)
        rows.append((rev, float(tok), found / len(s_final) if s_final else np.nan, found, len(s_final)))
    table = pd.DataFrame(rows, columns=["revision", "tokens", "recall", "n_found", "n_final"]).sort_values("tokens").reset_index(drop=True)
    hit = table[table["recall"] >= level - 1e-12]
    first = None if hit.empty or not s_final else hit.iloc[0]
    pct = None if first is None or final_tokens <= 0 else 100.0 * first["tokens"] / final_tokens
    return Convergence(model=model, head_class=head_class, threshold=threshold, n_final=len(s_final), level=level,
                       revision_at_level=None if first is None else str(first["revision"]),
                       tokens_at_level=None if first is None else float(first["tokens"]), pct_training=pct, table=table)


@dataclass
class Findings(Results):
    """The study's per-layer and circuit findings of every model (F1, F3, F4)."""

    layer_floor: list = field(default_factory=list)
    layer_onset: list = field(default_factory=list)
    convergence: list = field(default_factory=list)

    def summary(self) -> str:
        return "\n".join(x.summary() for x in self.layer_floor + self.layer_onset + self.convergence)


def analyse_findings(results, cfg, thresholds: dict, rng: np.random.Generator) -> Findings:
    """The layer floor and the layer onsets of every model with per-layer counts, and (with a
    per-head table) the circuit convergence at the analysis threshold and ``convergence_thresholds``."""
    fc = cfg.findings
    out = Findings()
    main = thresholds.get(fc.convergence_class)
    circuit_thresholds = sorted({float(t) for t in fc.convergence_thresholds} | ({float(main)} if main else set()))
    for model in results.models:  # a model without per-layer counts (or per-head rows) has no entry
        floor = layer_floor(class_layer_counts(results, fc.floor_class, model), model, fc.floor_class,
                            fc.floor_layers, fc.floor_rate, cfg.alpha, results.heads)
        onset = layer_onset(class_layer_counts(results, fc.onset_class, model), model, fc.onset_class,
                            fc.onset_min_count, fc.floor_layers, fc.n_perm, rng, persist=fc.onset_persist,
                            just_above_floor=fc.just_above_floor, alpha=cfg.alpha)
        circuits = [] if results.heads is None else [
            circuit_convergence(results.heads, model, fc.convergence_class, fc.recall_level, thr)
            for thr in circuit_thresholds]
        out.layer_floor += [floor] if floor is not None else []
        out.layer_onset += [onset] if onset is not None else []
        out.convergence += [c for c in circuits if c is not None]
    return out
