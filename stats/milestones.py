"""First-crossing milestones and the milestone gap ratio (the study's own definitions).

A milestone rule (``analysis.milestones.rules``) names a class and a level: at least
``min_heads`` flagged heads, or a whole-model fraction k / n >= ``min_fraction``.
Over a model's revisions r_1 < ... < r_m (positive tokens t_1 < ... < t_m), the
milestone is the first revision r_j that meets the level. The crossing itself lies
in (t_{j-1}, t_j]: the checkpoints bracket it, they do not place it. When r_1 already
meets the level the crossing is at or before t_1 (no lower end); when no revision
does, it is after t_m (``reached`` false).

Milestone gap ratio (``gap_late`` over ``gap_early``, default BOS-50% / induction
formed): point ``t_j(late) / t_j(early)``, the study's figure (OLMo 264B / 23B). With
the late crossing in (L_p, L_f] and the early one in (E_p, E_f], the ratio of the
crossings lies in the interval

    ( L_p / E_f ,  L_f / E_p ),

an honest *resolution* interval (not a sampling interval, so no p-value): a missing
L_p makes the lower end 0 (None); a missing E_p the upper end infinite (None); a
late milestone never reached makes the ratio a lower bound t_m / E_f.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd

from stats.config import MilestoneRuleConfig, check_milestone_rules, check_options
from stats.heads import class_counts
from stats.results import HEAD_CLASS_KEY, Results
from stats.units import format_number, format_threshold


@dataclass
class MilestoneRule(MilestoneRuleConfig):
    """One first-crossing rule (see module docstring): the schema's :class:`~stats.config.MilestoneRuleConfig`
    (its fields, defaults and constraints) with what the rule means."""

    @classmethod
    def from_config(cls, rc) -> "MilestoneRule":
        rule = cls(**{f.name: getattr(rc, f.name) for f in dataclasses.fields(MilestoneRuleConfig)})
        rule.validate()
        return rule

    def validate(self):
        """Refuse (one line) a value its schema refuses (the class read from the registry now: a class
        registered after import counts), or a rule that does not set exactly one level."""
        check_options(self, f"analysis.milestones rule {self.name!r}: ", sep=";")
        check_milestone_rules([self])

    def describe(self, threshold: Optional[float], unit: Optional[str] = None) -> str:
        """The rule in words, its threshold written in its unit (``at >= 30x``, ``at >= 0.4``)."""
        at = "" if threshold is None else f" at >= {format_threshold(threshold, unit)}"
        if self.min_heads is not None:
            return f"first revision with >= {self.min_heads} {self.head_class} heads{at}"
        return f"first revision with {self.head_class} fraction >= {100 * self.min_fraction:g}%{at}"

    def met(self, k: np.ndarray, n: np.ndarray) -> np.ndarray:
        if self.min_heads is not None:
            return k >= self.min_heads
        return k >= self.min_fraction * n - 1e-9 * n


@dataclass
class Milestone(Results):
    """The first revision of one model that meets a rule, and the bracket of its crossing."""

    RENAME = {**HEAD_CLASS_KEY, "bracket": "bracket_tokens"}
    EXCLUDE = ("last_tokens",)

    model: str
    name: str
    head_class: str
    rule: str
    reached: bool
    revision: Optional[str]
    tokens: Optional[float]
    previous_revision: Optional[str]
    previous_tokens: Optional[float]
    #: (lower, upper] tokens of the crossing; None where unbounded
    bracket: list = field(init=False)
    k: Optional[float] = None
    n: Optional[float] = None
    fraction: Optional[float] = field(init=False)
    last_tokens: Optional[float] = None

    def __post_init__(self):
        self.bracket = [self.previous_tokens, self.tokens] if self.reached else [self.last_tokens, None]
        self.fraction = None if self.k is None or not self.n else self.k / self.n

    def summary(self) -> str:
        where = f"at {self.revision} ({self.tokens:.3g} tokens)" if self.reached else "not reached"
        return f"{self.model}: {self.name} ({self.rule}) {where}"


def first_crossing(curve: pd.DataFrame, rule: MilestoneRule, model: str, threshold: Optional[float] = None,
                   unit: Optional[str] = None) -> Milestone:
    """The milestone of one model's count table (revision, tokens, k, n) under ``rule`` (its threshold
    written in ``unit``, stats/units.py)."""
    d = curve[curve["tokens"] > 0].sort_values("tokens")
    k, n = d["k"].to_numpy(float), d["n"].to_numpy(float)
    hit = np.flatnonzero(rule.met(k, n))
    desc = rule.describe(threshold, unit)
    last = float(d["tokens"].iloc[-1]) if len(d) else None
    if hit.size == 0:
        return Milestone(model, rule.name, rule.head_class, desc, False, None, None, None, None, last_tokens=last)
    j = int(hit[0])
    prev_rev = str(d["revision"].iloc[j - 1]) if j > 0 else None
    prev_tok = float(d["tokens"].iloc[j - 1]) if j > 0 else None
    return Milestone(model, rule.name, rule.head_class, desc, True, str(d["revision"].iloc[j]), float(d["tokens"].iloc[j]),
                     prev_rev, prev_tok, float(k[j]), float(n[j]), last)


@dataclass
class MilestoneGap(Results):
    """t(late milestone) / t(early milestone) with its resolution interval."""

    EXCLUDE = ("late", "early")

    model: str
    definition: str = field(init=False, default="milestone")
    late_class: str = field(init=False)
    early_class: str = field(init=False)
    late_milestone: str = field(init=False)
    early_milestone: str = field(init=False)
    formation: str = field(init=False)
    t_late: Optional[float] = field(init=False)
    t_early: Optional[float] = field(init=False)
    #: the last revision's tokens: a milestone not reached is crossed after it, if at all
    t_last: Optional[float] = field(init=False)
    late: Milestone
    early: Milestone
    ratio: Optional[float]
    ratio_ci: list
    interval: str = field(init=False, default="bracket: the crossings lie between each milestone's previous and "
                                                 "first-crossing revisions")
    p_value: None = field(init=False, default=None)
    bound: Optional[str] = None
    notes: list = field(default_factory=list)

    def __post_init__(self):
        self.late_class, self.early_class = self.late.head_class, self.early.head_class
        self.late_milestone, self.early_milestone = self.late.name, self.early.name
        self.formation = self.early.name
        self.t_late, self.t_early = self.late.tokens, self.early.tokens
        self.t_last = self.late.last_tokens if self.late.last_tokens is not None else self.early.last_tokens

    def summary(self) -> str:
        """One line; a bound (a milestone not reached) is written as a bound, never as a point."""
        if self.ratio is None:
            value = "no ratio" + ("" if self.ratio_ci[1] is None else f" (<= {self.ratio_ci[1]:.3g}x)")
        elif self.bound == "lower":
            value = f">= {self.ratio:.3g}x (a lower bound)"
        else:
            value = f"{self.ratio:.3g}x [{format_number(self.ratio_ci[0])}, {format_number(self.ratio_ci[1])}]"
        return f"{self.model}: milestone gap {self.late_milestone} / {self.early_milestone} {value}" + \
            (f"; {'; '.join(self.notes)}" if self.notes else "")


def _div(a, b):
    return None if a is None or b is None or b == 0 else a / b


def milestone_gap(late: Milestone, early: Milestone) -> MilestoneGap:
    """The milestone gap ratio and its bracket interval (see module docstring)."""
    if not early.reached:
        upper = _div(late.tokens, early.last_tokens) if late.reached else None
        return MilestoneGap(late.model, late, early, None, [None, upper], "upper" if upper is not None else None,
                            [f"{early.name!r} not reached by the last revision: no ratio"])
    if not late.reached:
        lo = _div(late.last_tokens, early.tokens)
        return MilestoneGap(late.model, late, early, lo, [lo, None], "lower",
                            [f"{late.name!r} not reached by the last revision: the ratio is a lower bound"])
    ratio = late.tokens / early.tokens
    lo, hi = _div(late.previous_tokens, early.tokens), _div(late.tokens, early.previous_tokens)
    notes = []
    if lo is None:
        notes.append(f"{late.name!r} met at the first revision: no lower end")
    if hi is None:
        notes.append(f"{early.name!r} met at the first revision: no upper end")
    return MilestoneGap(late.model, late, early, ratio, [lo, hi], None, notes)


def compute_milestones(results, rules, thresholds: dict) -> list:
    """Milestones of every model of ``results`` (a :class:`TrackedResults` already at
    the analysis thresholds) under ``rules``; a rule with its own threshold is counted
    from the per-head table (skipped, with no entry, without one)."""
    out = []
    units = results.source.get("units") or {}
    for model in results.models:
        for rule in rules:
            if rule.threshold is not None:  # without the class's selectivities its counts are empty
                if results.heads is None:
                    continue
                d = class_counts(results.heads[results.heads["model"] == model], rule.head_class, rule.threshold)
                thr = rule.threshold
            else:
                c = results.curves
                d = c[(c["model"] == model) & (c["class"] == rule.head_class)]
                thr = (results.source.get("thresholds") or {}).get(rule.head_class)
            if d.empty:
                continue
            out.append(first_crossing(d, rule, model, thr, units.get(rule.head_class)))
    return out


def milestone_gaps(milestones: list, late_name: str, early_name: str) -> list:
    """One :class:`MilestoneGap` per model having both named milestones."""
    by = {(m.model, m.name): m for m in milestones}
    models = sorted({m.model for m in milestones})
    return [milestone_gap(by[(mo, late_name)], by[(mo, early_name)]) for mo in models
            if (mo, late_name) in by and (mo, early_name) in by]
