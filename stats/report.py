"""Outputs of an analysis: ``summary.json``, CSV tables, figures and ``report.md``.

:func:`write_outputs` writes them into one folder; :func:`log_to_mlflow` logs the
same folder (and headline metrics) as one MLflow run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

from emergence.common.contract import KIND_TAG, STATS_CLASSES_TAG, STATS_KIND_TAG, STATS_MODELS_TAG, STATS_SOURCE_TAG
from emergence.common.store import log_run
from stats.story import interval_text
from stats.units import BOUND_SIGN, format_number as _num, format_threshold, format_tokens as _fmt_tokens, get_unit


#: The sign of a censored curve's t50, a bound: ``<=`` the first revision (left), ``>`` the last (right).
CENSORED_SIGN = {"left": "<= ", "right": "> "}


def _t50_cell(c: dict) -> str:
    """t50 of a curve row: a bound for a censored curve."""
    if c.get("censored"):
        return f"{CENSORED_SIGN[c['censored']]}{_fmt_tokens(c.get('t50'))} ({c['censored']}-censored)"
    return _fmt_tokens(c.get("t50")) + ({"upper": " (upper bound)", "lower": " (lower bound)"}.get(c.get("t50_bound"), ""))


def _course_cell(c: dict) -> str:
    d = c.get("decline")
    if d:
        return f"rise, then decline {d['peak_heads']:.3g} -> {d['later_heads']:.3g} heads after {d['falls_after'][0]}"
    return {"left": "formed before the first revision", "right": "not formed by the last revision"}.get(
        c.get("censored"), "-")


def _models_section(summary: dict) -> list:
    """One section per model: a short summary first (what formed, when, how sharp, the gap), then a
    disagreement of its two gaps, then the evidence (the story line, stats/story.py) and the reasons."""
    stories = summary.get("stories") or []
    if not stories:
        return []
    L = ["", "## By model", "",
         "Each model opens with a summary: what formed, when (t50 with its interval, or the bound a censored "
         "curve gives), how sharp (the verdict and the 10-90 width) and the gap, established only where the "
         "fitted interval or the milestone bracket excludes 1 and nothing (the other definition, the fitted point, "
         "a threshold of the sensitivity table) points the other way. Then the evidence: both gaps, fitted (t50s) "
         "and milestone (first crossings), in one line; where the two disagree, a line says so and why."]
    for st in stories:
        curves = [c for c in summary["curves"] if c["model"] == st["model"]]
        L += ["", f"### {st['model']}", "", "**Summary.**", ""]
        L += [f"- {curve_summary(c)}" for c in curves]
        if st.get("assessment"):
            L.append(f"- gap {st.get('late_class') or 'late'} / {st.get('early_class') or 'early'}: {st['assessment']}")
        L.append("")
        if st.get("warning"):
            L += [f"**Disagreement.** {st.get('disagreement_line') or st['warning']}", ""]
        L.append(f"Evidence: {st['text']}.")
        L += [f"- {c['class']}: {c['reason']}" for c in curves if c.get("censored") or c.get("decline")]
    return L


def curve_summary(c: dict) -> str:
    """One clause on a curve: what formed, when and how sharp (a censored curve: its bound)."""
    head = f"{c['class']}: "
    if c.get("censored") == "left":
        return head + f"formed at or before the first revision (t50 <= {_fmt_tokens(c.get('t50'))}, left-censored)"
    if c.get("censored") == "right":
        return head + f"not formed by the last revision (t50 > {_fmt_tokens(c.get('t50'))}, right-censored)"
    if c.get("shape") == "none" or c.get("t50") is None:
        return head + f"no transition ({str(c.get('reason') or '-').split(';')[0]})"
    width = _width_cell(c)
    how = "" if width == "-" else f", 10-90 width {width} decades"
    rise = c.get("rise_heads")
    heads = "" if rise is None else f", a rise of {rise:.3g} heads"
    return head + f"**{c['shape']}**, t50 ~{_fmt_tokens(c['t50'])} {interval_text(c.get('t50_ci'))}{how}{heads}"


def render_report(summary: dict, figures: dict) -> str:
    """The Markdown report of a summary and its figures (paths relative to the report): one section a stage."""
    L = _header(summary) + _models_section(summary) + _curves_section(summary) + _gaps_section(summary)
    L += _pooled_section(summary.get("pooled_gaps") or [])
    L += _milestone_section(summary.get("milestones") or [])
    L += _sensitivity_section(summary.get("sensitivity"))
    f = summary["findings"]
    L += _floor_section(f["layer_floor"]) + _onset_section(f["layer_onset"])
    L += _convergence_section(f["convergence"], summary.get("units") or {})
    L += _pr_section(summary) + _figures_section(figures)
    return "\n".join(L) + "\n"


def _header(summary: dict) -> list:
    """The title, the source, the thresholds and the notes, then the reproduction (when there is one)."""
    L = ["# Emergence statistics report", "", source_line(summary.get("source") or {}), ""]
    if summary.get("thresholds"):
        L += [thresholds_line(summary["thresholds"], summary.get("units") or {}), ""]
    L += [f"- Note: {note}" for note in summary.get("notes", [])]
    if summary.get("reproduction"):
        L += [""] + _reproduction_section(summary["reproduction"])
    return L


#: How the report names a source's settings (the rest: ``key value``); dicts and lists of the source
#: record that the report shows elsewhere (thresholds, units) are left out of the line.
SOURCE_WORDS = {"kind": "{}", "path": "file {}", "tracking_uri": "store {}", "experiment": "experiment {}",
                "filter": "runs where {}", "sweep": "sweep {}", "n_runs": "{} runs", "n_points": "{} points"}
SOURCE_SHOWN_ELSEWHERE = ("thresholds", "units", "declared_units")


def source_line(src: dict) -> str:
    """The source in words: ``Source: heads_csv, file /x/heads.csv.gz.`` (no raw dicts: a mapping is
    written ``key: value`` pairs, a list comma-separated)."""
    parts = []
    for key, value in src.items():
        if value is None or value == {} or value == [] or key in SOURCE_SHOWN_ELSEWHERE:
            continue
        if isinstance(value, dict):
            parts.append(f"{key.replace('_', ' ')} ({'; '.join(f'{k}: {v}' for k, v in value.items())})")
        elif isinstance(value, (list, tuple)):
            parts.append(f"{key.replace('_', ' ')} {', '.join(map(str, value))}")
        else:
            parts.append(SOURCE_WORDS.get(key, key.replace("_", " ") + " {}").format(value))
    return "Source: " + (", ".join(parts) or "-") + "."


def thresholds_line(thresholds: dict, units: dict) -> str:
    """The analysis thresholds in their units: the classes grouped by unit, each group saying what its
    values are (``induction 50x, bos 30x (selectivity, x over a uniform head)``; ``bos 0.5 (score or mass
    in [0, 1])``). With units known, only the classes of the per-head table."""
    groups: dict = {}
    for c, v in thresholds.items():
        if units and c not in units:
            continue
        unit = get_unit((units.get(c) or {}).get("unit"))
        groups.setdefault(unit.name, (unit, []))[1].append(f"{c} {unit.format(v)}")
    text = "; ".join(f"{', '.join(items)} ({unit.description})" for unit, items in groups.values())
    return f"Thresholds, applied at analysis time to the per-head values (a head is flagged at or above): {text}."


def _width_cell(c: dict) -> str:
    """The 10-90 width the verdict read: its limits (decades), or the fitted width where there are none."""
    lo, hi = c.get("width_lower"), c.get("width_upper")
    hi = float("inf") if hi is None else hi  # no upper limit (written as null): a rise that may go on
    if lo is not None:
        if hi == float("inf"):
            return f">= {lo:.2f}" if lo > 0 else "-"  # no limit on either side: nothing to print
        return f"<= {hi:.2f}" if lo <= 0 else f"{lo:.2f} to {hi:.2f}"
    if c.get("width_decades") is None:
        return "-"
    return ("<= " if c.get("width_is_bound") else "") + f"{c['width_decades']:.2f}"


def _curves_section(summary: dict) -> list:
    """The curves: verdict, times and evidence, one row a curve, then the reasons."""
    L = ["", "## Curves: sharp or gradual, and when", "",
         "Verdict rule: `none` for too few revisions, a rise below the minimum number of heads, no evidence of "
         "change against noise (the change test, p > alpha: head-wise permutations where the heads are followed, a "
         "quasi-likelihood bootstrap for aggregate counts), a change seen at one revision alone (an outlier, or the "
         "last revision), or a rise whose midpoint lies "
         "outside the screened range (`left-censored`: formed at or before the first revision, t50 `<=` it; "
         "`right-censored`: not formed by the last, t50 `>` it); otherwise by the rise's 10-90 width in decades of "
         "tokens against `analysis.shape.sharp_width_decades`: `sharp` when its upper limit is within it (\"sharp at "
         "this resolution\" when the limit is one checkpoint interval), `gradual` when its lower limit exceeds it, "
         "`unresolved` when the data cannot tell (the reason says what would). Regime (column `regime`): `identity` "
         "where a per-head table follows the same heads (the heads' switch-on times bound the width), `aggregate` "
         "where counts have no head identity (independent draws: the fitted logistic's interval). A count that rises "
         "and later falls is fitted on its rise only (column `course`). The largest jump and the step test (is the "
         "rise a *pure* step?) are evidence, not criteria. "
         "Times are from the 4-parameter logistic in log10 tokens, "
         "intervals by parametric bootstrap; a width marked `<=` is a bound (the transition falls between two revisions). "
         "Where the runs know the model's known revisions, the largest jump says whether its interval is two adjacent checkpoints "
         "(the transition resolved) or how many checkpoints lie inside (`python -m emergence model=<model> "
         "revision=refine` screens a few of them).",
         "",
         "| model | class | shape | t50 | 95% CI | onset | saturation | 10-90 width (dec.) | largest jump (share) "
         "| change point | best model | p (step) | dispersion | regime | course |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in summary["curves"]:
        jump = "-" if c.get("max_jump") is None else f"{c['max_jump']:+.3f} ({c['max_jump_share']:.0%})"
        between = c.get("max_jump_between")
        if between is not None and c.get("max_jump") is not None:
            jump += ", adjacent checkpoints" if between == 0 else f", {between} checkpoints inside"
        cp = ("-" if not c.get("changepoint_tokens")
              else f"{_fmt_tokens(c['changepoint_tokens'][0])} -> {_fmt_tokens(c['changepoint_tokens'][1])}")
        censored = bool(c.get("censored"))
        onset, sat = ("-", "-") if censored else (_fmt_tokens(c.get("onset")), _fmt_tokens(c.get("saturation")))
        L.append(f"| {c['model']} | {c['class']} | **{c['shape']}** | {_t50_cell(c)} | {interval_text(c.get('t50_ci'))} | "
                 f"{onset} | {sat} | {_width_cell(c)} | {jump} | {cp} | "
                 f"{c.get('best_model') or '-'} | {_num(c.get('p_step'))} | "
                 f"{_num((c.get('dispersion') or {}).get('phi'))} | "
                 f"{c.get('regime') or '-'} | {_course_cell(c)} |")
    L += ["", "Reasons:", ""]
    for c in summary["curves"]:
        L.append(f"- {c['model']} / {c['class']}: {c['shape']} - {c['reason']}")
        L += [f"  - continuous check, {metric} ({v['scale']}): reads {v['reads']} (10-90 width between "
              f"{v['width_grid'][0]:.2g} and {v['width_grid'][1]:.2g} decades)"
              for metric, v in (c.get("continuous") or {}).items() if v.get("width_grid") is not None]
    return L


def _gaps_section(summary: dict) -> list:
    """The fitted and milestone gaps, one row each."""
    curves = {(c["model"], c["class"]): c for c in summary["curves"]}
    head = ["`fitted`: t50 of the late class over the early class's formation point (logistic fits), 95% bootstrap "
            "interval and the one-sided separation test (H0 ratio <= 1); with a censored side the ratio is a bound "
            "(`>=` or `<=`), its interval one-sided (`-`: open) and its test one-sided against the bound. "
            "`milestone`: the study's first-crossing "
            "milestones, with the interval the bracketing revisions allow (each crossing lies between the revision "
            "before the first crossing and the first crossing; a resolution interval, not a sampling one: no p-value).",
            "", "| model | definition | t(late) | t(early) | ratio | interval | p-value | notes |", "|---|---|---|---|---|---|---|---|"]
    return _section("Gaps: induction first, sinks later?", summary["gaps"], "No model has both classes.", head,
                    lambda g: f"| {g['model']} | {g.get('definition', 'fitted')} | {_gap_time(g, 'late', curves)} | "
                              f"{_gap_time(g, 'early', curves)} | {_gap_ratio_cell(g)} | "
                              f"{interval_text(g.get('ratio_ci'), _num)} | {_num(g.get('p_value'))} | "
                              f"{'; '.join(g.get('notes') or []) or '-'} |")


def _section(title: str, items, empty: str, head: list, row) -> list:
    """A section of the report: its title, then ``head`` and one ``row(item)`` an item, or the line
    ``empty`` when there are no items."""
    return ["", f"## {title}", ""] + (head + [row(x) for x in items] if items else [empty])


def _gap_time(g: dict, side: str, curves: dict) -> str:
    """A gap's time of one side with what it is: ``181B (bos t50)``; a censored curve's time as its
    bound, ``> 4M (bos t50, right-censored)``; a milestone not reached as the bound the last revision
    gives, ``> 4M (BOS-50% not reached)``."""
    if g.get("definition") == "milestone":
        name = g[f"{side}_milestone"]
        if g.get(f"t_{side}") is None:
            return f"> {_fmt_tokens(g.get('t_last'))} ({name} not reached)"
        return f"{_fmt_tokens(g.get(f't_{side}'))} ({name})"
    what = f"{g['late_class']} t50" if side == "late" else f"{g['early_class']} {g['formation']}"
    censored = (curves.get((g["model"], g[f"{side}_class"])) or {}).get("censored")
    what += f", {censored}-censored" if censored else ""
    return f"{CENSORED_SIGN.get(censored, '')}{_fmt_tokens(g.get(f't_{side}'))} ({what})"


def _gap_ratio_cell(g: dict) -> str:
    """A gap ratio: a bound with its sign (``>= 1.67``), none where there is no ratio."""
    if g.get("ratio") is None:
        return "-"
    return f"{BOUND_SIGN.get(g.get('bound'), '')}{_num(g.get('ratio'))}"


def _floor_section(layer_floor: list) -> list:
    """F1: heads of the class in the floor layers."""
    head = ["| model | layers | flagged / head-revisions | 95% upper bound (head-revisions) | distinct heads ever flagged "
            "| 95% upper bound (heads) | p (H0 rate >= r0) |",
            "|---|---|---|---|---|---|---|"]
    return _section("Layer floor", layer_floor, "No per-layer counts.", head, lambda x: (
        f"| {x['model']} | {x['layers']} | {x['flagged_head_revisions']} / {x['head_revisions']} | {x['upper_bound']:.4f} | "
        f"{x['heads_ever_flagged']} / {x['n_heads']} | {x['upper_bound_heads']:.4f} | {_num(x['p_value'])} |"))


def _onset_section(layer_onset: list) -> list:
    """F3: the layers where the class appears first and last."""
    return _section("Where BOS heads appear first", layer_onset, "No per-layer counts.", [], lambda x: (
        f"- {x['model']}: middle first **{x.get('verdict', 'n/a')}**. First in layer(s) {x['first_layers']}, "
        f"last (outside the floor) in {x['last_layers']}, never in {x['never_layers']} (an onset kept "
        f"{x.get('onset_persist', 1)} revisions); onset against depth below the middle rho = "
        f"{_num(x.get('depth_rho'))}, p = {_num(x.get('depth_p_value'))} (H1: deeper earlier); layers "
        f"{x.get('just_above_floor')} last p = {_num(x.get('just_above_last_p_value'))}; middle-out rho = "
        f"{_num(x['middle_out_rho'])}, p = {_num(x['middle_out_p_value'])}"))


def _convergence_section(convergence: list, units: dict) -> list:
    """F4: when the final circuit is recalled (thresholds in the unit of the class's column)."""
    def row(x) -> str:
        unit = (units.get(x.get("class")) or {}).get("unit")
        thr = "-" if x.get("threshold") is None else format_threshold(x["threshold"], unit)
        return (f"| {x['model']} | {thr} | {x['n_final']} | {x['level']:.2f} | {x['revision_at_level'] or '-'} | "
                f"{_fmt_tokens(x['tokens_at_level'])} | {_num(x['pct_training'], '{:.2f}%')} |")

    head = ["The final circuit: the heads at or above the threshold at the final revision; recall at a revision: the "
            "share of them already at or above it there.", "",
            "| model | threshold | final set | recall level | first revision | tokens | % of training |",
            "|---|---|---|---|---|---|---|"]
    return _section("Circuit convergence", convergence, "No per-head table: not computed.", head, row)


def _pr_section(summary: dict) -> list:
    """F5: does a head's PR rise at or before its crossing."""
    L = ["", "## PR lead", ""]
    if not summary.get("has_pr_data"):
        L.append("No PR data: the runs carry no participation-ratio column, so the PR-lead analysis is empty.")
    elif not summary["pr_lead"]:
        L.append("PR data present but no model has final induction heads.")
    else:
        L += ["| model | heads | elevated before | same revision | after or never | not observable | at or before "
              "| median lead ratio | sign-test p |",
              "|---|---|---|---|---|---|---|---|---|"]
        for x in summary["pr_lead"]:
            if not x["heads"]:
                L.append(f"| {x['model']} | 0 (no induction heads at the final revision) | - | - | - | - | - | - | - |")
                continue
            L.append(f"| {x['model']} | {len(x['heads'])} | {x['before']} | {x['same']} | {x['after_or_never']} | "
                     f"{x.get('not_observable', 0)} | {_num(x.get('at_or_before'), '{:.0%}')} | "
                     f"{_num(x['median_lead_ratio'])} | {_num(x['p_value'])} |")
        L.append("")
        L.append(f"Rule: {summary['pr_lead'][0]['rule']}.")
    return L


def _figures_section(figures: dict) -> list:
    """The figures by kind, and those that could not be drawn."""
    L = ["", "## Figures", ""]
    for note in figures.get("skipped") or []:
        L.append(f"- Figure skipped (it could not be drawn; the rest of the report is complete): {note}")
    if figures.get("skipped"):
        L.append("")
    for kind, title in FIGURE_TITLES.items():
        paths = figures.get(kind) or []
        if paths:
            L += [f"### {title}", "", *(f"![{Path(p).stem}]({p})" for p in paths), ""]
    return L


#: The report's figure sections, in order: {kind: title}.
FIGURE_TITLES = {"timeline": "Timeline", "models": "Models on one axis",
                 "seeds": "Seed suites: each run's curves and the pooled t50",
                 "forest": "Seed suites: each run's gap ratio and the pooled gap",
                 "layers": "BOS heads by layer and revision", "curves": "Curves with fits",
                 "heads": "Heads that cross, by revision", "circuit": "The final circuit",
                 "convergence": "Circuit convergence", "pr": "PR trajectories", "continuous": "Continuous metrics"}


def _cell(v) -> str:
    return str(v).replace("|", "/").replace("\n", " ")


def _reproduction_section(rep: dict) -> list:
    """The first section: the reference study's reported figures beside the tool's."""
    mark = {True: "yes", False: "**no**", None: "n/a"}
    L = [f"## Reproduction of {rep['study']}", "",
         f"The study's reported figures (F1-F5) beside this analysis, for {', '.join(rep['models'])}: counts at "
         "the analysis thresholds (the study's: BOS >= 30x, induction >= 50x), milestones as defined in the "
         "milestones section. `agrees`: yes / **no** / n/a (not comparable); the note says why they differ.", "",
         "| finding | model | quantity | reported | tool | agrees | note |", "|---|---|---|---|---|---|---|"]
    for r in rep["rows"]:
        L.append(f"| {r['finding']} | {r['model']} | {_cell(r['quantity'])} | {_cell(r['reported'])} | {_cell(r['tool'])} | "
                 f"{mark[r['agrees']]} | {_cell(r['note']) or '-'} |")
    return L


def _milestone_section(milestones: list) -> list:
    return _section("Milestones (first crossings)", milestones, "No milestones (no curve of the milestone classes).",
                    ["| model | milestone | rule | first revision | tokens | crossing in | count |",
                     "|---|---|---|---|---|---|---|"], _milestone_row)


def _milestone_row(m: dict) -> str:
    lo, hi = m["bracket_tokens"]
    if m["reached"]:
        where = f"({_fmt_tokens(lo) if lo is not None else '0'}, {_fmt_tokens(hi)}]"
        count = f"{m['k']:g}/{m['n']:g}"
    else:
        where, count = f"> {_fmt_tokens(lo)} (not reached)", "-"
    return f"| {m['model']} | {m['name']} | {m['rule']} | {m['revision'] or '-'} | {_fmt_tokens(m['tokens'])} | {where} | {count} |"


def _sensitivity_section(sens) -> list:
    rows = (sens or {}).get("rows")
    head = [f"Rule: {sens['rule']}; {sens['n_boot']} bootstrap replicates a curve (the row at a class's analysis threshold, "
            "marked *, is the main analysis). Thresholds in the unit of the class's values; a censored curve's t50 and "
            "gap are bounds (`>=`, `<=`); a class with no head at a threshold (`not reached`), or with every head "
            "flagged at every revision (`every head`), has no transition there and no gap.", "",
            "| model | class | threshold | heads at last revision (max fraction) | shape | t50 | 95% CI | gap ratio | 95% CI | p-value |",
            "|---|---|---|---|---|---|---|---|---|---|"] if rows else []
    return _section("Threshold sensitivity", rows, "Not computed: it needs per-head selectivities "
                    "of both gap classes (a heads_csv source, or runs with heads.csv).", head, _sensitivity_row)


def _sensitivity_row(r: dict) -> str:
    threshold = r.get("threshold_text") or format_threshold(r["threshold"], r.get("unit"))
    none = not r.get("max_fraction")  # no head of the class at this threshold, at any revision
    every = (r.get("min_fraction") or 0) >= 1  # every head at every revision: no transition to time
    gap, gap_ci, p = ("not reached" if none else "every head", "-", "-") if none or every else (
        _gap_ratio_cell({"ratio": r.get("gap_ratio"), "bound": r.get("gap_bound")}),
        interval_text(r.get("gap_ratio_ci"), _num), _num(r.get("gap_p_value")))
    return (f"| {r['model']} | {r['class']} | {threshold}{' *' if r['is_analysis_threshold'] else ''} | "
            f"{_num(r['k_last'], '{:g}')}/{_num(r['n_last'], '{:g}')} ({_num(r['max_fraction'], '{:.1%}')}) | "
            f"{r['shape']} | {'-' if none or every else _t50_cell(r)} | "
            f"{'-' if none or every else interval_text(r.get('t50_ci'))} | "
            f"{gap} | {gap_ci} | {p} |")


def write_outputs(analysis, out_dir, figures: bool = True, progress: bool = False) -> dict:
    """Write summary.json, tables/*.csv, figures/*.png and report.md into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = analysis.summary()
    figs = {}
    if figures:
        from stats.figures import write_figures  # matplotlib only when figures are drawn

        figs = write_figures(analysis, out_dir, progress)
    summary["figures"] = figs
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    tdir = out_dir / "tables"
    tdir.mkdir(exist_ok=True)
    tables = {}
    for name, df in analysis.tables().items():
        p = tdir / f"{name}.csv"
        df.to_csv(p, index=False)
        tables[name] = str(p.relative_to(out_dir))
    if summary.get("reproduction"):
        p = tdir / "reproduction.tex"
        p.write_text(reproduction_latex(summary["reproduction"]))
        tables["reproduction_latex"] = str(p.relative_to(out_dir))
    (out_dir / "report.md").write_text(render_report(summary, figs))
    return {"summary": out_dir / "summary.json", "report": out_dir / "report.md", "tables": tables, "figures": figs}


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  ">=": r"$\geq$", "<=": r"$\leq$", "->": r"$\rightarrow$"}
_LATEX_SPECIAL = re.compile("|".join(map(re.escape, sorted(_LATEX_ESCAPES, key=len, reverse=True))))


def latex_escape(text) -> str:
    """Plain text for a LaTeX table cell (special characters escaped, >= <= -> as symbols)."""
    return _LATEX_SPECIAL.sub(lambda m: _LATEX_ESCAPES[m.group()], str(text))


def reproduction_latex(rep: dict) -> str:
    """The reproduction table as a LaTeX ``tabular`` (booktabs rules), for a paper."""
    mark = {True: "yes", False: "\\textbf{no}", None: "n/a"}
    cols = ("finding", "model", "quantity", "reported", "tool", "agrees", "note")
    lines = [f"% {rep['study']} reproduced by emergence (python -m stats); one row per figure of the study",
             "\\begin{tabular}{llp{3.2cm}p{3.2cm}p{3.6cm}lp{3.6cm}}", "\\toprule",
             " & ".join(c.capitalize() for c in cols) + " \\\\", "\\midrule"]
    for r in rep["rows"]:
        lines.append(" & ".join(mark[r[c]] if c == "agrees" else latex_escape(r[c]) for c in cols) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


def metric_key(name: str) -> str:
    """``name`` as an MLflow metric or tag key, which may hold only alphanumerics, ``_ - . : /``
    and spaces: a curve's qualifier in brackets becomes a ``:`` suffix (``toy_neox [seed 0]`` ->
    ``toy_neox:seed 0``, ``pythia_1b [synthetic_induction]`` -> ``pythia_1b:synthetic_induction``),
    any other character ``_``."""
    name = re.sub(r"\s*\[([^\]]*)\]", r":\1", str(name))
    return re.sub(r"[^\w\-.:/ ]", "_", name)


def log_to_mlflow(out_dir, summary: dict, tracking_uri: str, artifacts: Optional[str], experiment: str,
                  params: Optional[dict] = None) -> str:
    """Log the output folder and headline metrics as one MLflow run, through the store both apps
    write with (:func:`emergence.common.store.log_run`: prepared under its lock, retried on a
    locked SQLite file, an I/O failure one line); return its id."""
    # Named after what it analysed: the models, the classes, and the source (experiment or file).
    models = sorted({c["model"] for c in summary["curves"]})
    classes = sorted({c["class"] for c in summary["curves"]})
    source = (params or {}).get("source.path") or (params or {}).get("source.experiment") or ""
    source = str(source).rsplit("/", 1)[-1]
    name = (f"stats: {', '.join(models) or 'no curves'}"
            + (f" ({', '.join(classes)})" if classes else "") + (f" from {source}" if source else ""))
    tags = {STATS_KIND_TAG: "analysis", KIND_TAG: "stats", STATS_MODELS_TAG: ",".join(models)[:5000],
            STATS_CLASSES_TAG: ",".join(classes), STATS_SOURCE_TAG: str(source)}
    metrics, verdicts = summary_metrics_and_tags(summary)
    return log_run(tracking_uri, experiment, artifacts, name=name, tags=tags | verdicts, params=params or {},
                   metrics=metrics, folder=out_dir)


def summary_metrics_and_tags(summary: dict) -> tuple:
    """The headline numbers of ``summary.json`` as MLflow metrics (each curve's t50 and largest-jump share,
    each gap's ratio and p-value: fitted ``gap_*``, milestone ``milestone_gap_*``; each pooled gap's ratio,
    p-value, tau^2 and I^2) and its verdicts as tags (each curve's shape and censoring, each gap's bound
    side); keys made safe by :func:`metric_key`."""
    metrics, tags = {}, {}
    for c in summary["curves"]:
        key = metric_key(f"{c['model']}.{c['class']}")
        metrics.update({f"{name}.{key}": float(c[name]) for name in ("t50", "max_jump_share")
                        if c.get(name) is not None})
        tags[f"shape.{key}"] = c["shape"]
        if c.get("censored"):
            tags[f"censored.{key}"] = c["censored"]
    fitted = {"ratio": "ratio", "p": "p_value"}
    gaps = [("gap" if g.get("definition", "fitted") == "fitted" else "milestone_gap", g, fitted) for g in summary["gaps"]]
    pooled = {n: n for n in ("ratio", "p_value", "tau2", "i2")}
    gaps += [("pooled_gap", g, pooled) for g in summary.get("pooled_gaps") or []]
    for prefix, g, fields in gaps:  # pooled: seed suites (stats/pooling.py)
        model = metric_key(g["model"])
        metrics.update({f"{prefix}_{name}.{model}": float(g[f]) for name, f in fields.items() if g.get(f) is not None})
        if g.get("bound"):
            tags[f"{prefix}_bound.{model}"] = g["bound"]
    return metrics, tags


def _seed_t50(row: dict, head_class: str) -> str:
    """One run's t50 of a class in the pooled table: a censored one as its bound."""
    return CENSORED_SIGN.get(row.get(f"censored.{head_class}"), "") + _fmt_tokens(row.get(f"t50.{head_class}"))


def _pooled_section(groups: list) -> list:
    """Seed suites (stats/pooling.py): per group, each run's gap and shapes, then the pooled gap."""
    if not groups:
        return []
    L = ["", "## Seeds: one model, many training runs", "",
         "Runs of one model that differ only in their seeds (a seed suite), pooled per group by a random-effects "
         "meta-analysis of their log gap ratios (stats/pooling.py): the pooled ratio with its interval (Hartung-Knapp, "
         "t-based, for few runs; with a censored run, whose gap is a bound, the interval-censored likelihood and its "
         "interval at the fitted tau^2, scaled as Hartung-Knapp's), the one-sided test of H0 pooled ratio <= 1, the "
         "between-run variance tau^2 (decades^2) "
         "and I^2, and the prediction interval for a new run. A censored run enters as its bound (`>=` / `<=`), "
         "never as a point."]
    for g in groups:
        sign = BOUND_SIGN.get(g.get("bound"), "")
        value = g.get("ratio")
        if value is None and g.get("bound"):
            value = g["ci"][0] if g["bound"] == "lower" else g["ci"][1]
        L += ["", f"### {g['model']}", "",
              f"Pooled {g['late_class']} / {g['early_class']} gap: **{sign}{_num(value)}x** over {_num(g.get('n_pooled'))} "
              f"of {g['n_seeds']} runs, {g['level']:.0%} CI {interval_text(g.get('ci'), _num)}, prediction interval for a new run "
              f"{interval_text(g.get('prediction_interval'), _num)}, p = {_num(g.get('p_value'))}, tau^2 = {_num(g.get('tau2'))} "
              f"{interval_text(g.get('tau2_ci'), _num) if g.get('tau2_ci') else ''}, I^2 = {_num(g.get('i2'), '{:.0%}')} "
              f"({g.get('method') or 'not pooled'}).", "",
              f"| run | kind | t({g['early_class']}) | {g['early_class']} shape | t50({g['late_class']}) | "
              f"{g['late_class']} shape | gap ratio | 95% interval | p-value | pooled |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for r in g["per_seed"]:
            b = BOUND_SIGN.get(r.get("bound"), "")
            L.append(f"| {r['model']} | {r['seed_kind']} | {_seed_t50(r, g['early_class'])} | "
                     f"{r.get('shape.' + g['early_class'])} | {_seed_t50(r, g['late_class'])} | "
                     f"{r.get('shape.' + g['late_class'])} | {b}{_num(r.get('ratio'))} | {interval_text(r.get('ci'), _num)} | "
                     f"{_num(r.get('p_value'))} | {'yes' if r['used'] else 'no: ' + (r.get('left_out') or 'other kind')} |")
        L.append("")
        L += [f"- {head_class} shape agreement: {a['modal']} in {a['counts'][a['modal']]} of "
              f"{sum(a['counts'].values())} runs ({', '.join(f'{k}: {v}' for k, v in a['counts'].items())})"
              for head_class, a in (g.get("shapes") or {}).items() if a.get("modal") is not None]
        vs = g.get("variance_share")
        if vs:
            L.append(f"- between-run variance: data order tau^2 = {_num(vs['tau2_data'])} ({vs['n_data']} runs), "
                     f"initialisation tau^2 = {_num(vs['tau2_weight'])} ({vs['n_weight']} runs): share due to the data "
                     f"order {_num(vs['share_data'], '{:.0%}')}, to the initialisation {_num(vs['share_weight'], '{:.0%}')}"
                     + (f"; independent runs tau^2 = {_num(vs['tau2_both'])}" if vs.get("tau2_both") is not None else ""))
        L += [f"- Note: {note}" for note in g.get("notes") or []]
    return L
