r"""Adaptive revision refinement: which revisions to screen next to resolve a transition.

Ten log-spaced revisions say that a class's head count rises *somewhere* between two
screened revisions; the model's known revisions usually include many checkpoints in between.
Refinement screens a few of them, round after round, until the rise sits between two
*adjacent* known revisions.

Rule (per class c, per round). With the screened revisions r_1 < ... < r_m (by tokens)
and their counts k_c(r_i) of flagged heads:

1. **Bracket.** The adjacent screened pair (r_i, r_{i+1}) with the largest rise
   :math:`k_c(r_{i+1}) - k_c(r_i) > 0` (ties: the earliest pair, i.e. the first
   formation): the transition the statistics report is a class's rise. No bracket when
   no count rises above the one before it (no transition to resolve). A fall is
   bracketed only on request (``revision.refine.declines``), as its own entry
   ``<class> decline``: the largest drop, refined like a rise.
2. **Resolved** when no known revision lies strictly between r_i and r_{i+1}.
3. **Next revisions.** Otherwise up to ``per_round`` known revisions strictly inside
   the bracket, spaced evenly in log tokens: the targets
   :math:`x_j = x_{lo} + (x_{hi} - x_{lo})\, j / (p + 1)`, j = 1..p, with
   :math:`x = \log_{10} t`, each taking the nearest inside revision (by log tokens)
   not already screened or chosen. With ``per_round = 1`` this is bisection in log
   tokens, so a bracket holding B known revisions is resolved in about
   :math:`\log_2 B` rounds of one revision.

A bracket that starts at a zero-token revision (``step0``) uses the first inside
revision's tokens as its lower end in log space (log 0 is undefined).

Largest rise, not a fitted change point: the counts follow the same heads across
revisions and only rise or fall between screened revisions, so the interval with the
largest rise is the one that holds most of the formation, which is also the
``sharp`` rule's interval in :mod:`stats.shape`. This module is pure (no model, no
store); emergence/refine_rounds.py reads the store and screens what it plans, round by round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence

from emergence.revisions import Revision


@dataclass(frozen=True)
class Bracket:
    """The screened pair (lo, hi) that holds a class's largest jump in head count."""

    head_class: str
    lo: Revision
    hi: Revision
    k_lo: float
    k_hi: float
    #: Registry revisions strictly between ``lo`` and ``hi`` (0: adjacent checkpoints).
    inside: int
    #: ``rise`` (the count goes up from ``lo`` to ``hi``) or ``decline`` (down).
    direction: str = "rise"

    @property
    def resolved(self) -> bool:
        return self.inside == 0

    def describe(self) -> str:
        return (f"{self.lo.name} ({self.k_lo:g}) -> {self.hi.name} ({self.k_hi:g}), "
                f"{self.inside} known revision(s) inside")

    @property
    def span(self) -> str:
        """``lo -> hi``, as tables name a bracket."""
        return f"{self.lo.name} -> {self.hi.name}"


@dataclass
class RoundPlan:
    """One round: the bracket of each class and the revisions chosen inside it."""

    brackets: Dict[str, Optional[Bracket]]
    chosen: Dict[str, List[Revision]] = field(default_factory=dict)

    @property
    def revisions(self) -> List[Revision]:
        """Every revision to screen this round, once, ordered by tokens."""
        return sorted({r for rs in self.chosen.values() for r in rs})

    @property
    def done(self) -> bool:
        """No revision left to screen: every bracket resolved (or no transition)."""
        return not self.revisions

    def describe(self) -> str:
        lines = []
        for head_class, bracket in self.brackets.items():
            if bracket is None:
                what = "decline" if head_class.endswith(DECLINE) else "rise"
                lines.append(f"  {head_class}: no transition to refine (no screened count {what}s from one "
                             "revision to the next)")
            elif bracket.resolved:
                lines.append(f"  {head_class}: resolved to adjacent checkpoints, {bracket.describe()}")
            else:
                added = ", ".join(r.name for r in self.chosen.get(head_class, [])) or "none"
                lines.append(f"  {head_class}: bracket {bracket.describe()}; adding {added}")
        return "\n".join(lines)


#: The suffix of a class's decline entry in a plan (``bos decline``).
DECLINE = " decline"


def find_bracket(counts: Mapping[Revision, float], head_class: str, known: Sequence[Revision],
                 direction: str = "rise") -> Optional[Bracket]:
    """The bracket of ``head_class`` (module rule 1-2) from its screened ``counts``: its largest
    rise, or with ``direction="decline"`` its largest drop; None when there is none."""
    screened = sorted(counts)
    if len(screened) < 2:
        return None
    sign = 1.0 if direction == "rise" else -1.0
    jumps = [sign * (counts[b] - counts[a]) for a, b in zip(screened, screened[1:])]
    best = max(jumps)
    if best <= 0:
        return None
    i = jumps.index(best)  # the earliest of equal jumps
    lo, hi = screened[i], screened[i + 1]
    inside = sum(1 for r in known if lo < r < hi)
    return Bracket(head_class, lo, hi, float(counts[lo]), float(counts[hi]), inside, direction)


def _log_tokens(r: Revision, floor: float) -> float:
    """log10 tokens; ``floor`` stands in for a zero-token revision (log 0 is undefined)."""
    return math.log10(r.tokens if r.tokens > 0 else floor)


def choose_inside(bracket: Bracket, known: Sequence[Revision], per_round: int,
                  taken: set) -> List[Revision]:
    """Up to ``per_round`` known revisions inside ``bracket``, even in log tokens (rule 3),
    none of them in ``taken`` (screened already, or chosen for another class)."""
    inside = sorted(r for r in known if bracket.lo < r < bracket.hi and r not in taken)
    if not inside or per_round < 1:
        return []
    floor = next((r.tokens for r in inside if r.tokens > 0), 1)
    lo = _log_tokens(bracket.lo, floor)
    hi = _log_tokens(bracket.hi, floor)
    logs = [_log_tokens(r, floor) for r in inside]
    chosen: List[int] = []
    for j in range(1, min(per_round, len(inside)) + 1):
        target = lo + (hi - lo) * j / (per_round + 1)
        free = [i for i in range(len(inside)) if i not in chosen]
        chosen.append(min(free, key=lambda i: (abs(logs[i] - target), i)))
    return [inside[i] for i in sorted(chosen)]


def plan_round(counts: Mapping[str, Mapping[Revision, float]], known: Sequence[Revision],
               classes: Sequence[str], per_round: int, declines: bool = False) -> RoundPlan:
    """The next round for ``classes`` from the screened ``counts[class][revision]``: each class's
    rise, and with ``declines`` its decline too (entry ``<class> decline``).

    Classes share screens: a revision chosen for one class is not chosen again for
    another, and every class's bracket is found from all screened revisions."""
    screened = {r for head_class in classes for r in counts.get(head_class, {})}
    taken = set(screened)
    plan = RoundPlan(brackets={})
    entries = [(c, "rise", c) for c in classes] + ([(c + DECLINE, "decline", c) for c in classes] if declines else [])
    for key, direction, head_class in entries:
        bracket = find_bracket(counts.get(head_class, {}), head_class, known, direction)
        plan.brackets[key] = bracket
        if bracket is not None and not bracket.resolved:
            chosen = choose_inside(bracket, known, per_round, taken)
            plan.chosen[key] = chosen
            taken.update(chosen)
    return plan


def simulate(known: Sequence[Revision], start: Sequence[Revision], count_at, classes: Sequence[str],
             per_round: int, rounds: int, declines: bool = False) -> List[RoundPlan]:
    """Run refinement against a known ``count_at(class, revision)`` (no model): the rounds'
    plans; the last one is where refinement stopped (``done``, or the ``rounds`` limit reached: then
    it plans a round that is not screened). For tests and benchmarks."""
    counts: Dict[str, Dict[Revision, float]] = {c: {r: count_at(c, r) for r in start} for c in classes}
    plans = []
    for _ in range(rounds):
        plan = plan_round(counts, known, classes, per_round, declines)
        plans.append(plan)
        if plan.done:
            return plans
        for r in plan.revisions:
            for c in classes:
                counts[c][r] = count_at(c, r)
    plans.append(plan_round(counts, known, classes, per_round, declines))  # where the last round left it
    return plans
