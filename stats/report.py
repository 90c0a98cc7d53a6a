"""Outputs of an analysis: ``summary.json``, CSV tables, figures and ``report.md``.

:func:`write_outputs` writes them into one folder; :func:`log_to_mlflow` logs the
same folder (and headline metrics) as one MLflow run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np


def _fmt_tokens(t) -> str:
    if t is None or (isinstance(t, float) and not np.isfinite(t)):
        return "-"
    t = float(t)
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(t) >= div:
            return f"{t / div:.3g}{unit}"
    return f"{t:.3g}"


def _fmt_ci(ci) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "-"
    return f"[{_fmt_tokens(ci[0])}, {_fmt_tokens(ci[1])}]"


def _num(v, fmt="{:.3g}") -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    return fmt.format(v)


def render_report(summary: dict, figures: dict) -> str:
    """The Markdown report of a summary and its figures (paths relative to the report)."""
    L = ["# Emergence statistics report", ""]
    src = summary.get("source", {})
    L.append("Source: " + ", ".join(f"{k}={v}" for k, v in src.items() if v is not None) + ".")
    L.append("")
    for note in summary.get("notes", []):
        L.append(f"- Note: {note}")
    L += ["", "## Curves: sharp or gradual, and when", "",
          "Verdict rule: `none` for too few revisions, a rise below the minimum or the constant model within "
          "2 AICc of the best; `sharp` when at least half the rise lies between one pair of adjacent revisions and "
          "either the fitted 10-90 width is at most the checkpoint spacing there or a single step is not rejected "
          "(bootstrap p >= alpha); `gradual` otherwise. Times are from the 4-parameter logistic in log10 tokens, "
          "intervals by parametric bootstrap; a width marked `<=` is a bound (the transition falls between two revisions).",
          "",
          "| model | class | shape | t50 | 95% CI | onset | saturation | 10-90 width (dec.) | largest jump (share) | change point | best model | p (step) | dispersion |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in summary["curves"]:
        width = "-" if c.get("width_decades") is None else ("<= " if c.get("width_is_bound") else "") + f"{c['width_decades']:.2f}"
        jump = "-" if c.get("max_jump") is None else f"{c['max_jump']:+.3f} ({c['max_jump_share']:.0%})"
        cp = "-" if not c.get("changepoint_tokens") else f"{_fmt_tokens(c['changepoint_tokens'][0])} -> {_fmt_tokens(c['changepoint_tokens'][1])}"
        disp = c.get("dispersion") or {}
        t50 = _fmt_tokens(c.get("t50")) + ({"upper": " (upper bound)", "lower": " (lower bound)"}.get(c.get("t50_bound"), ""))
        L.append(f"| {c['model']} | {c['class']} | **{c['shape']}** | {t50} | {_fmt_ci(c.get('t50_ci'))} | "
                 f"{_fmt_tokens(c.get('onset'))} | {_fmt_tokens(c.get('saturation'))} | {width} | {jump} | {cp} | "
                 f"{c.get('best_model') or '-'} | {_num(c.get('p_step'))} | {_num(disp.get('phi'))} |")
    L += ["", "Reasons:", ""]
    for c in summary["curves"]:
        L.append(f"- {c['model']} / {c['class']}: {c['shape']} - {c['reason']}")
        cont = c.get("continuous") or {}
        for metric, v in cont.items():
            if v.get("max_jump_share") is not None:
                L.append(f"  - continuous check, {metric} ({v['scale']}): largest adjacent jump {v['max_jump_share']:.0%} of its range")
    L += ["", "## Gaps: induction first, sinks later?", ""]
    if summary["gaps"]:
        L += ["H0: ratio <= 1 (one-sided, bootstrap).", "",
              "| model | t(late) | t(early) | ratio | 95% CI | p-value | notes |", "|---|---|---|---|---|---|---|"]
        for g in summary["gaps"]:
            ci = g.get("ratio_ci") or [None, None]
            cis = "-" if ci[0] is None else f"[{ci[0]:.3g}, {ci[1]:.3g}]"
            L.append(f"| {g['model']} | {_fmt_tokens(g.get('t_late'))} ({g['late_class']} t50) | "
                     f"{_fmt_tokens(g.get('t_early'))} ({g['early_class']} {g['formation']}) | {_num(g.get('ratio'))} | {cis} | "
                     f"{_num(g.get('p_value'))} | {'; '.join(g.get('notes') or []) or '-'} |")
    else:
        L.append("No model has both classes.")
    f = summary["findings"]
    L += ["", "## Layer floor", ""]
    if f["layer_floor"]:
        L += ["| model | layers | flagged / head-revisions | 95% upper bound (head-revisions) | distinct heads ever flagged | 95% upper bound (heads) | p (H0 rate >= r0) |",
              "|---|---|---|---|---|---|---|"]
        for x in f["layer_floor"]:
            L.append(f"| {x['model']} | {x['layers']} | {x['flagged_head_revisions']} / {x['head_revisions']} | {x['upper_bound']:.4f} | "
                     f"{x['heads_ever_flagged']} / {x['n_heads']} | {x['upper_bound_heads']:.4f} | {_num(x['p_value'])} |")
    else:
        L.append("No per-layer counts.")
    L += ["", "## Where BOS heads appear first", ""]
    if f["layer_onset"]:
        for x in f["layer_onset"]:
            L.append(f"- {x['model']}: first in layer(s) {x['first_layers']}, last (outside the floor) in {x['last_layers']}, "
                     f"never in {x['never_layers']}; middle-out rho = {_num(x['middle_out_rho'])}, p = {_num(x['middle_out_p_value'])}")
    else:
        L.append("No per-layer counts.")
    L += ["", "## Circuit convergence", ""]
    if f["convergence"]:
        L += ["| model | final set | recall level | first revision | tokens | % of training |", "|---|---|---|---|---|---|"]
        for x in f["convergence"]:
            L.append(f"| {x['model']} | {x['n_final']} | {x['level']:.2f} | {x['revision_at_level'] or '-'} | "
                     f"{_fmt_tokens(x['tokens_at_level'])} | {_num(x['pct_training'], '{:.2f}%')} |")
    else:
        L.append("No per-head table: not computed.")
    L += ["", "## PR lead", ""]
    if not summary.get("has_pr_data"):
        L.append("No PR data: the runs carry no participation-ratio column, so the PR-lead analysis is empty.")
    elif not summary["pr_lead"]:
        L.append("PR data present but no model has final induction heads.")
    else:
        L += ["| model | heads | elevated before | same revision | after or never | median lead ratio | sign-test p |", "|---|---|---|---|---|---|---|"]
        for x in summary["pr_lead"]:
            if not x["heads"]:
                L.append(f"| {x['model']} | 0 (no induction heads at the final revision) | - | - | - | - | - |")
                continue
            L.append(f"| {x['model']} | {len(x['heads'])} | {x['before']} | {x['same']} | {x['after_or_never']} | "
                     f"{_num(x['median_lead_ratio'])} | {_num(x['p_value'])} |")
        L.append("")
        L.append(f"Rule: {summary['pr_lead'][0]['rule']}.")
    L += ["", "## Figures", ""]
    titles = {"timeline": "Timeline", "layers": "BOS heads by layer and revision", "curves": "Curves with fits",
              "convergence": "Circuit convergence", "pr": "PR trajectories", "continuous": "Continuous metrics"}
    for kind in ("timeline", "layers", "curves", "convergence", "pr", "continuous"):
        paths = figures.get(kind) or []
        if not paths:
            continue
        L += [f"### {titles[kind]}", ""]
        for p in paths:
            L.append(f"![{Path(p).stem}]({p})")
        L.append("")
    return "\n".join(L) + "\n"


def write_outputs(analysis, out_dir, figures: bool = True, progress: bool = False) -> dict:
    """Write summary.json, tables/*.csv, figures/*.png and report.md into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = analysis.summary()
    figs = {}
    if figures:
        from stats.figures import write_figures

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
    (out_dir / "report.md").write_text(render_report(summary, figs))
    return {"summary": out_dir / "summary.json", "report": out_dir / "report.md", "tables": tables, "figures": figs}


def log_to_mlflow(out_dir, summary: dict, tracking_uri: str, artifacts: str, experiment: str,
                  params: Optional[dict] = None) -> str:
    """Log the output folder and headline metrics as one MLflow run; return its id."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        location = Path(artifacts).resolve().as_uri() + "/" + experiment
        exp_id = client.create_experiment(experiment, artifact_location=location)
    else:
        exp_id = exp.experiment_id
    run = client.create_run(exp_id, tags={"stats.kind": "analysis", "mlflow.runName": "stats"})
    rid = run.info.run_id
    for k, v in (params or {}).items():
        client.log_param(rid, k, str(v)[:500])
    for c in summary["curves"]:
        key = f"{c['model']}.{c['class']}"
        if c.get("t50") is not None:
            client.log_metric(rid, f"t50.{key}", float(c["t50"]))
        if c.get("max_jump_share") is not None:
            client.log_metric(rid, f"max_jump_share.{key}", float(c["max_jump_share"]))
        client.set_tag(rid, f"shape.{key}", c["shape"])
    for g in summary["gaps"]:
        if g.get("ratio") is not None:
            client.log_metric(rid, f"gap_ratio.{g['model']}", float(g["ratio"]))
        if g.get("p_value") is not None:
            client.log_metric(rid, f"gap_p.{g['model']}", float(g["p_value"]))
    client.log_artifacts(rid, str(out_dir))
    client.set_terminated(rid, "FINISHED")
    return rid
