"""The reference study's *reported* figures, as data, and the reproduction table.

Xu (2026), *When Do Attention Circuits Form?* (code and per-head data: repository
``skydancerosel/spectral-probe-circuits``, MIT licence, (c) 2026 Yongzhong Xu; its
summary ``cross_architecture/developmental_note.md``). The figures below are what
the study *states*, F1-F5 (METHODS section 1 and the note's tables); the tool's
figures are computed by the analysis. :func:`reproduce` sets them side by side for
every analysed model the study covers (matched by registry name; revisions by name,
else by token count within 3 %), one row per figure, with ``agrees`` true, false, or
None where the two are not comparable, and a note saying why they differ.

The study's per-head measurements for Pythia-1B and OLMo-1B-0724 are bundled as
:data:`XU2026_HEADS` (``python -m stats source=xu2026``); its OLMoE runs are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from stats.results import Results
from stats.units import BOUND_SIGN, format_number as _num

#: The study's per-head table (gzip CSV; see ``stats/data/README.md``).
XU2026_HEADS = Path(__file__).resolve().parent / "data" / "xu2026_heads.csv.gz"
STUDY = "Xu (2026)"


@dataclass(frozen=True)
class ReportedRevision:
    """F2 (BOS fraction) and the induction count (>= 50x) the study reports at one revision."""

    model: str
    revision: Optional[str]
    tokens: float
    bos_pct: float
    bos_heads: Optional[int] = None
    n_heads: Optional[int] = None
    induction_heads: Optional[int] = None


#: Whole-model BOS fraction (>= 30x) and induction heads (>= 50x) as reported.
REVISIONS = (
    ReportedRevision("pythia_1b", "step3000", 6.29e9, 10.9, 14, 128, 5),
    ReportedRevision("pythia_1b", "step38000", 79.7e9, 46.1, 59, 128, 4),
    ReportedRevision("pythia_1b", "step143000", 299.9e9, 57.8, 74, 128, 3),
    ReportedRevision("olmo_1b_0724", "step11000-tokens23B", 23e9, 0.0, 0, 256, 3),
    ReportedRevision("olmo_1b_0724", "step56000-tokens117B", 117e9, 7.4, 19, 256, 3),
    ReportedRevision("olmo_1b_0724", "step126000-tokens264B", 264e9, 70.3, 180, 256, 3),
    ReportedRevision("olmo_1b_0724", "step644000-tokens1350B", 1350e9, 80.9),
    ReportedRevision("olmo_1b_0724", "step1454000-tokens3048B", 3048e9, 80.9, 207, 256, 3),
    ReportedRevision("olmoe_1b_7b_0924", None, 20e9, 3.5),
    ReportedRevision("olmoe_1b_7b_0924", None, 104e9, 42.2),
    ReportedRevision("olmoe_1b_7b_0924", None, 419e9, 50.8),
    ReportedRevision("olmoe_1b_7b_0924", None, 838e9, 69.9),
    ReportedRevision("olmoe_1b_7b_0924", None, 5117e9, 75.8),
)

#: F2: shape of the whole-model BOS curve; a sharp one with its bracketing revisions.
SHAPES = {
    "pythia_1b": ("gradual", None, "ramp 0% -> 58% over ~6B -> 300B tokens"),
    "olmo_1b_0724": ("sharp", ("step56000-tokens117B", "step126000-tokens264B"),
                     "7.4% -> 70.3% between adjacent checkpoints 117B and 264B"),
    "olmoe_1b_7b_0924": ("gradual", None, "ramp 3.5% -> 76%"),
}


@dataclass(frozen=True)
class ReportedMilestone:
    """F3: a first-crossing milestone (None: never reached in the study's revisions)."""

    model: str
    name: str
    revision: Optional[str]
    tokens: Optional[float]


MILESTONES = (
    ReportedMilestone("pythia_1b", "induction formed", "step3000", 6.29e9),
    ReportedMilestone("pythia_1b", "BOS-10%", "step3000", 6.29e9),
    ReportedMilestone("pythia_1b", "BOS-30%", "step38000", 79.7e9),
    ReportedMilestone("pythia_1b", "BOS-50%", "step143000", 299.9e9),
    ReportedMilestone("pythia_1b", "BOS-70%", None, None),
    ReportedMilestone("olmo_1b_0724", "induction formed", "step11000-tokens23B", 23e9),
    ReportedMilestone("olmo_1b_0724", "BOS-10%", "step126000-tokens264B", 264e9),
    ReportedMilestone("olmo_1b_0724", "BOS-30%", "step126000-tokens264B", 264e9),
    ReportedMilestone("olmo_1b_0724", "BOS-50%", "step126000-tokens264B", 264e9),
    ReportedMilestone("olmo_1b_0724", "BOS-70%", "step126000-tokens264B", 264e9),
    ReportedMilestone("olmoe_1b_7b_0924", "induction formed", None, 20e9),
    ReportedMilestone("olmoe_1b_7b_0924", "BOS-10%", None, 41e9),
    ReportedMilestone("olmoe_1b_7b_0924", "BOS-30%", None, 104e9),
    ReportedMilestone("olmoe_1b_7b_0924", "BOS-50%", None, 419e9),
    ReportedMilestone("olmoe_1b_7b_0924", "BOS-70%", None, 1677e9),
)

#: F3: milestone gap BOS-50% / induction formed (None: the study gives none).
GAPS = {
    "pythia_1b": (None, "induction and BOS-10% co-emerge at ~6B: gap below the checkpoint resolution"),
    "olmo_1b_0724": (264 / 23, "induction at 23B, BOS-50% at 264B: ~11.5x"),
    "olmoe_1b_7b_0924": (419 / 20, "induction at 20B, BOS-50% at 419B: ~21x"),
}

#: F4: first revision with recall >= 1/3, >= 2/3 and 1 of the final induction set, and
#: the share of training (%) at 2/3.
CONVERGENCE = {
    "pythia_1b": {"33%": "step256", "67%": "step3000", "100%": "step38000", "pct_67": 2.0},
    "olmo_1b_0724": {"33%": "step1000-tokens2B", "67%": "step5000-tokens10B", "100%": "step1454000-tokens3048B",
                     "pct_67": 0.3},
    "olmoe_1b_7b_0924": {"33%": "step5000-tokens20B", "67%": "step10000-tokens41B", "100%": "step400000-tokens1677B",
                         "pct_67": 0.8},
}

#: F5: final induction heads whose PR the study reports elevated at or before their
#: induction crossing (Pythia L4_H4: PR 2.0 -> 27.4 at step256, crossing at step3000, ~12x).
PR_LEAD_HEADS = {
    "pythia_1b": ((4, 4), (7, 1), (7, 0)),
    "olmo_1b_0724": ((2, 11), (4, 12), (12, 8)),
    "olmoe_1b_7b_0924": ((7, 0), (9, 8), (5, 10), (12, 14)),
}

STUDY_MODELS = tuple(SHAPES)


@dataclass
class Reproduction(Results):
    """Rows ``{finding, model, quantity, reported, tool, agrees, note}``."""

    study: str = field(init=False, default=STUDY)
    models: list
    rows: list = field(default_factory=list)

    def summary(self) -> str:
        disagree = [r for r in self.rows if r["agrees"] is False]
        return (f"{self.study} reproduced for {', '.join(self.models)}: {len(self.rows)} figures, "
                f"{len(disagree)} disagree")

    def add(self, finding, model, quantity, reported, tool, agrees, note=""):
        self.rows.append({"finding": finding, "model": model, "quantity": quantity, "reported": reported, "tool": tool,
                          "agrees": agrees, "note": note})


def _tok(t) -> str:
    if t is None or not np.isfinite(t):
        return "-"
    return f"{t / 1e12:.3g}T" if t >= 1e12 else f"{t / 1e9:.3g}B"


def _match_revision(df, revision: Optional[str], tokens: Optional[float]):
    """The row of ``df`` (one model and class) at ``revision``, else at ``tokens`` (3 %)."""
    if revision is not None and (df["revision"] == revision).any():
        return df[df["revision"] == revision].iloc[0]
    if tokens is not None:
        close = df[np.isclose(df["tokens"], tokens, rtol=0.03)]
        if not close.empty:
            return close.iloc[0]
    return None


def _fractions(rep: Reproduction, study, model):
    c = study.results.curves
    bos = c[(c["model"] == model) & (c["class"] == "bos")]
    ind = c[(c["model"] == model) & (c["class"] == "induction")]
    for r in (r for r in REVISIONS if r.model == model):
        row = _match_revision(bos, r.revision, r.tokens)
        where = f"{r.revision or _tok(r.tokens)} ({_tok(r.tokens)})"
        reported = (f"{r.bos_heads}/{r.n_heads} = " if r.bos_heads is not None else "") + f"{r.bos_pct:.1f}%"
        if r.induction_heads is not None:
            reported += f"; {r.induction_heads} induction"
        if row is None:
            rep.add("F2 table", model, f"BOS fraction at {where}", reported, "revision not analysed", None)
            continue
        pct = 100 * row["k"] / row["n"]
        tool = f"{int(row['k'])}/{int(row['n'])} = {pct:.1f}%"
        agrees = abs(round(pct, 1) - r.bos_pct) < 0.05
        if r.induction_heads is not None:
            irow = _match_revision(ind, row["revision"], row["tokens"])
            if irow is not None:
                tool += f"; {int(irow['k'])} induction"
                agrees = agrees and int(irow["k"]) == r.induction_heads
        rep.add("F2 table", model, f"BOS fraction; induction heads at {where}", reported, tool, bool(agrees))


def _floor(rep, study, model):
    """F1 as the study states it: no BOS head (>= 30x) in layers 0 and 1, at any revision of any model."""
    f = next((x for x in study.layer_floor if x.model == model), None)
    if f is None:
        rep.add("F1", model, "BOS heads in L0/L1, every revision", "0", "no per-layer counts", None)
        return
    tool = (f"{f.k} of {f.N} head-revisions (95% bound on the rate {f.upper_bound:.3f}); "
            f"{f.heads_ever} of {f.n_heads} distinct heads (bound {f.upper_bound_heads:.3f})")
    rep.add("F1", model, f"BOS heads in L{'/L'.join(map(str, f.layers))}, every revision", "0", tool, f.k == 0)


def _shape(rep, study, model):
    shape, bracket, text = SHAPES[model]
    try:
        c = study.curve(model, "bos").to_dict()
    except KeyError:
        return
    jump = c.get("max_jump_revisions")
    tool = c["shape"]
    if jump:
        tool += f"; largest jump {jump[0]} -> {jump[1]} ({c['max_jump_share']:.0%} of the rise)"
    agrees = c["shape"] == shape and (bracket is None or (jump is not None and tuple(jump) == tuple(bracket)))
    note = "" if agrees else f"the verdict rule reads this curve differently: {c['reason']}"
    rep.add("F2 shape", model, "shape of the BOS curve", f"{shape}: {text}", tool, bool(agrees), note)


def _milestones(rep, study, model):
    for r in (m for m in MILESTONES if m.model == model):
        try:
            m = study.milestone(model, r.name)
        except KeyError:
            continue
        reported = "never (in the study's revisions)" if r.tokens is None else f"{r.revision or ''} ({_tok(r.tokens)})".strip()
        if not m.reached:
            tool = f"not reached by {_tok(m.last_tokens)}"
            agrees = r.tokens is None
        else:
            tool = f"{m.revision} ({_tok(m.tokens)}), crossing in ({_tok(m.previous_tokens)}, {_tok(m.tokens)}]"
            agrees = r.tokens is not None and (m.revision == r.revision if r.revision else bool(np.isclose(m.tokens, r.tokens, rtol=0.03)))
        rep.add("F3 milestone", model, m.name, reported, tool, bool(agrees))


def _gaps(rep, study, model):
    value, text = GAPS[model]
    try:
        mg = study.milestone_gap(model)
    except KeyError:
        mg = None
    if mg is not None:
        ci = mg.ratio_ci
        tool = ("-" if mg.ratio is None else f"{mg.ratio:.3g}") + f" (bracket {_num(ci[0])} to {_num(ci[1])})"
        agrees = None if value is None or mg.ratio is None else bool(np.isclose(mg.ratio, value, rtol=0.05))
        note = "" if value is not None else "the study states no ratio for this model"
        rep.add("F3 gap", model, f"milestone gap {mg.late.name} / {mg.early.name}", text, tool, agrees, note)
    try:
        g = study.gap(model)
    except KeyError:
        return
    if g.ratio is None or not np.isfinite(g.ratio):
        tool = "not computed: " + "; ".join(g.notes)
        agrees = None if value is None else False
    else:
        sign = BOUND_SIGN.get(g.bound, "")
        tool = f"{sign}{g.ratio:.3g} [{_num(g.ratio_ci[0])}, {_num(g.ratio_ci[1])}], p = {_num(g.p_value)}"
        sep = g.ratio > 1 and g.p_value < study.config.alpha
        agrees = None if value is None else bool(sep)
    reported = "induction first, BOS later (separable)" if value is not None else text
    rep.add("F3 gap", model, f"fitted gap t50({g.late_class}) / {g.formation}({g.early_class}), H0 ratio <= 1", reported,
            tool, agrees, "" if value is not None else "the study reports no separation for this model")


#: The study's claim on where BOS heads appear first (every model).
MIDDLE_FIRST = "first in the middle of the network, spreading outwards; the layers just above L0/L1 last"


def _middle_first(rep, study, model):
    """The middle-first claim as a verdict, from its two one-sided tests (stats/findings.py)."""
    o = next((x for x in study.layer_onset if x.model == model), None)
    if o is None:
        rep.add("middle first", model, "where BOS heads appear first", MIDDLE_FIRST, "no per-layer counts", None)
        return
    d = o.to_dict()
    tool = (f"{d['verdict']}: first in L{', L'.join(map(str, o.first_layers))}; onset against depth below the middle "
            f"rho = {_num(d['depth_rho'])} (p = {_num(d['depth_p_value'])}); L{', L'.join(map(str, o.just_above))} last "
            f"p = {_num(d['just_above_last_p_value'])}")
    agrees = {"yes": True, "no": False, "mixed": False}.get(d["verdict"])
    note = {"yes": "both parts of the claim hold", "mixed": "one part of the claim holds, not the other",
            "no": "neither part of the claim holds at this checkpoint resolution"}.get(d["verdict"], "too few layers")
    rep.add("middle first", model, f"where BOS heads appear first (onset kept {o.persist} revisions)", MIDDLE_FIRST, tool,
            agrees, note)


def _convergence(rep, study, model):
    """F4 at every threshold the analysis computed it at (the study's figures follow from its 30x
    class rule), each row worded from its own data."""
    ref = CONVERGENCE[model]
    reported = f"67% at {ref['67%']} (~{ref['pct_67']}% of training); 33% at {ref['33%']}"
    convs = [c for c in study.convergence if c.model == model]
    if not convs:
        rep.add("F4", model, "recall of the final induction set", reported, "no per-head table: not computed", None)
        return
    for conv in convs:
        at = "" if conv.threshold is None else f" (>= {conv.threshold:g}x)"
        r33 = conv.recall_at(ref["33%"])
        tool = (f"{conv.level:.0%} at {conv.revision_at_level or 'never'}"
                + (f" ({conv.pct_training:.2g}% of training)" if conv.pct_training is not None else "")
                + ("" if r33 is None else f"; recall at {ref['33%']}: {r33:.0%}") + f" (final set: {conv.n_final} heads)")
        agrees = conv.revision_at_level == ref["67%"]
        level = "the analysis threshold" if conv.threshold is None else f">= {conv.threshold:g}x"
        if agrees:
            note = f"the 67% point is reproduced at {level}"
            if r33 is not None and r33 < 1 / 3 - 1e-9:
                note += f"; the 33% point at {ref['33%']} is not (recall {r33:.0%} there)"
        else:
            note = (f"at {level} the final circuit reaches 67% at {conv.revision_at_level or 'no revision'}, "
                    f"not {ref['67%']}")
        rep.add("F4", model, f"recall of the final induction set{at}", reported, tool, agrees, note)


def _pr_lead(rep, study, model):
    """F5 as the study states it: the PR rises at or before the crossing (a rise at the crossing
    revision itself counts, reported as the same revision; a lead must persist through the
    crossing; a head crossing at the first revision is not observable)."""
    lead = next((p for p in study.pr_lead if p.model == model), None)
    for layer, head in PR_LEAD_HEADS[model]:
        name = f"L{layer}_H{head}"
        reported = "PR elevated at or before the induction crossing"
        if lead is None:
            rep.add("F5", model, f"PR lead of {name}", reported, "no PR data", None)
            continue
        h = next((x for x in lead.heads if (x.layer, x.head) == (layer, head)), None)
        if h is None:
            rep.add("F5", model, f"PR lead of {name}", reported, "not a final induction head at the analysis threshold", None)
            continue
        tool = f"crosses {h.revision_crossed}; " + {
            1: f"PR elevated from {h.revision_elevated}, held through the crossing (lead {_num(h.lead_ratio)}x)",
            0: "PR elevated at the crossing revision itself, not before (same revision)",
            -1: f"PR elevated only after the crossing, from {h.revision_elevated}" if h.revision_elevated
                else "PR never elevated",
            None: "crosses at the first screened revision",
        }[h.sign]
        note = {1: "lead", 0: "at or before: the same revision (no lead visible at this resolution)",
                -1: "PR rises after the crossing", None: "not observable: no screened revision before the crossing"}[h.sign]
        rep.add("F5", model, f"PR lead of {name}", reported, tool, None if h.sign is None else h.sign >= 0, note)


def reproduce(study) -> Optional[Reproduction]:
    """The reproduction table of an analysis that includes the study's models, else None."""
    models = [m for m in study.results.models if m in STUDY_MODELS]
    if not models:
        return None
    rep = Reproduction(models)
    for model in models:
        for rows in (_fractions, _floor, _shape, _milestones, _gaps, _convergence, _pr_lead, _middle_first):
            rows(rep, study, model)
    return rep
