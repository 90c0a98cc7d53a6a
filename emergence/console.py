"""What a job or a sweep prints: its tables, its plan, its refinement and its end-of-run summary
(:func:`print_summary`, the same for one job and a ``-m`` sweep, with the statistics report of
:func:`stats_report`). Results are :class:`emergence.screening.RevisionResult` lists, read here,
never built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from omegaconf import DictConfig

from emergence.common.contract import INDUCTION_LOSS_METRIC, count_metric, fraction_metric, parse_metric
from emergence.common.mlflow_ui import open_lines
from emergence.common.units import format_tokens
from emergence.revisions import Revision
from emergence.ui import remember_job

if TYPE_CHECKING:
    from emergence.refine_rule import RoundPlan
    from emergence.screening import RevisionResult


def format_table(results: List[RevisionResult]) -> str:
    """Per model and revision: tokens, BOS fraction, the count of flagged heads of each
    reported class (``screen.classes``; every class is logged in the run), induction loss."""
    lines = []
    for model in dict.fromkeys(r.label or r.model for r in results):
        rows = [r for r in results if (r.label or r.model) == model]
        classes = list(dict.fromkeys(c for r in rows for c in r.classes))
        widths = [max(len(c) + 2, 7) for c in classes]
        lines.append(f"{model}")
        lines.append(f"  {'revision':<24}{'tokens':>14}{'BOS frac':>10}"
                     + "".join(f"{c:>{w}}" for c, w in zip(classes, widths)) + f"{'ind. loss':>11}  run")
        for r in sorted(rows, key=lambda r: r.revision):
            m = r.metrics
            frac = m.get(fraction_metric("bos"))
            counts = [m.get(count_metric(c)) for c in classes]
            loss = m.get(INDUCTION_LOSS_METRIC)
            lines.append(
                f"  {r.revision.name:<24}{r.revision.tokens:>14,}"
                f"{'' if frac is None else f'{frac:.1%}':>10}"
                + "".join(f"{'' if k is None else f'{k:.0f}':>{w}}" for k, w in zip(counts, widths))
                + f"{'' if loss is None else f'{loss:.3f}':>11}"
                f"  {r.run_id[:8]}{f' ({r.note})' if r.note else ' (done before)' if r.skipped else ''}")
    return "\n".join(lines)


def formation_rows(results: List[RevisionResult]) -> List[Dict[str, str]]:
    """Per model: tokens at the first revision with an induction head and with a BOS head, the layers
    that hold BOS heads (at any revision), and the induction loss at the first and last revisions."""
    rows = []
    results = [r for r in results if r.metrics]  # (a revision another sweep screens has none here)
    for model in dict.fromkeys(r.label or r.model for r in results):
        ordered = sorted((r for r in results if (r.label or r.model) == model), key=lambda r: r.revision)

        def first(metric: str) -> str:
            hit = next((r for r in ordered if r.metrics.get(metric, 0) >= 1), None)
            return "none" if hit is None else f"{format_tokens(hit.revision.tokens)} ({hit.revision.name})"

        parsed = [(parse_metric(k), v) for r in ordered for k, v in r.metrics.items()]
        layers = sorted({p.layer for p, v in parsed if p is not None and p.kind == "layer_count"
                         and p.head_class == "bos" and v > 0})
        loss = [r.metrics.get(INDUCTION_LOSS_METRIC, float("nan")) for r in ordered]
        rows.append({"model": model, "induction heads from": first(count_metric("induction")),
                     "BOS heads from": first(count_metric("bos")),
                     "layers with BOS heads": ", ".join(map(str, layers)) if layers else "none (no sink)",
                     "induction loss first -> last": f"{loss[0]:.2f} -> {loss[-1]:.2f}"})
    return rows


def format_markdown(rows: List[Dict[str, str]]) -> str:
    if not rows:
        return ""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(row[k] for k in keys) + " |" for row in rows]
    return "\n".join(lines)


def format_plan(jobs: Sequence, screen: str = "") -> str:
    """The planned jobs of a dry run (:class:`emergence.planning.PlannedJob`), one line each, then the count."""
    width = max([20] + [len(job.model) + 2 for job in jobs])
    lines = [f"{'#':>3}  {'model':<{width}}{'revision':<26}{'step':>9}{'tokens':>18}  download"]
    for i, job in enumerate(jobs):
        r = job.revision
        lines.append(f"{i:>3}  {job.model:<{width}}{r.name:<26}{r.step:>9,}{r.tokens:>18,}  {job.download}")
    lines += [f"first: {step}" for step in dict.fromkeys(getattr(job, "preparation", "") for job in jobs) if step]
    lines.append(f"dry run: {len(jobs)} job(s){f', screen {screen}' if screen else ''}; "
                 "no model loaded, no run logged")
    return "\n".join(lines)


def format_refinement(model: str, before: RoundPlan, after: RoundPlan, added: List[Revision], rounds: int,
                      refined: Optional[dict] = None) -> str:
    """The before/after table of a refinement: each class's bracket before the first round, the
    brackets its rounds refined (a later round may move to a rise the added revisions showed
    larger), the bracket after, and whether that one is resolved."""
    def cell(b) -> str:
        return "no transition" if b is None else f"{b.span} ({b.inside} inside)"

    lines = [f"refinement of {model}: {len(added)} revision(s) added in {rounds} round(s)",
             "| class | bracket before | brackets refined | bracket after | resolved to adjacent checkpoints |",
             "|---|---|---|---|---|"]
    for head_class, b in after.brackets.items():
        resolved = "n/a" if b is None else ("yes" if b.resolved else "no")
        worked = ", ".join(r.span for r in (refined or {}).get(head_class, [])) or "none"
        lines.append(f"| {head_class} | {cell(before.brackets.get(head_class))} | {worked} | {cell(b)} | {resolved} |")
    return "\n".join(lines)


def interrupted_line(done: int, total: int, unit: str) -> str:
    """The one line a job or a sweep stopped by Ctrl-C prints: what finished and how to resume."""
    return (f"interrupted: {done} of {total} {unit} finished and kept (the one under way is marked KILLED); "
            "run the same command again to resume: finished ones are skipped")


def stats_report(cfg: DictConfig, models: List[str]) -> str:
    """The statistics of this job's models (``stats.api.analyse_store``, in this process): the report
    lands beside the job's outputs (``${emergence_home:}/outputs/stats/...``) and is logged into the
    job's store. Returns stats' one-line summary, or why it failed and how to rerun it (a failing
    report never fails the job: its screens are logged)."""
    # (the statistics stack, scipy, statsmodels and matplotlib, only when a report is asked for)
    from stats.api import analyse_store
    from stats.errors import StatsError

    try:
        return analyse_store(cfg.tracking.uri, cfg.tracking.experiment, models, cfg.tracking.artifacts)
    except Exception as exc:  # noqa: BLE001  (the screens are logged; a failing report does not fail the job)
        why = str(exc) if isinstance(exc, StatsError) else f"{type(exc).__name__}: {exc}"
        return (f"stats report failed: {why}\n  rerun it with: python -m stats source.tracking_uri={cfg.tracking.uri} "
                f"source.experiment={cfg.tracking.experiment} source.models=[{','.join(models)}]")


def print_summary(cfg, results: List[RevisionResult], failed: Optional[Sequence[str]] = None, n_jobs: int = 0) -> None:
    """The end of a run (nothing printed with ``report=false``; the statistics still run with
    ``stats=true``). ``failed`` None: one job, whose table is printed, then when circuits form and the
    statistics of its models when it screened more than one revision; a list: a ``-m`` sweep's
    failed jobs of its ``n_jobs`` jobs, after the summary of every job's results. Then where to open
    the runs."""
    remember_job(cfg.tracking.uri, cfg.tracking.experiment)  # what `python -m emergence.ui` opens
    sweep = failed is not None
    # the statistics run whenever stats=true, printed or not (report=false prints nothing)
    statistics = (stats_report(cfg, sorted({r.model for r in results}))
                  if cfg.stats and results and (sweep or len(results) > 1) else None)
    if not cfg.report:
        return
    if sweep and results:
        print("\n=== sweep summary ===")
    if results or not sweep:
        print(format_table(results))
    if results and (sweep or len(results) > 1):
        print("\nWhen circuits form (first screened revision with at least one head flagged):")
        print(format_markdown(formation_rows(results)))
        if statistics is not None:
            print(statistics)
    done_before = sum(1 for r in results if r.skipped and r.metrics)
    if done_before:
        print(f"\n{done_before} of {len(results)} {'job(s)' if sweep else 'revision(s)'} finished before and skipped "
              "(their runs are reused; force=true screens them again)")
    if not sweep:
        print(f"\n{len(results)} run(s) in experiment {cfg.tracking.experiment!r}. Open them with:\n"
              f"{open_lines(cfg.tracking.uri, cfg.tracking.experiment)}")
        return
    if failed:
        print(f"\n{len(failed)} of {n_jobs} job(s) failed "
              "(their runs are FAILED in MLflow, with the error in the tag emergence.error):")
        for line in failed:
            print(f"  {line}")
    if results or failed:
        print(f"\nOpen the runs with:\n{open_lines(cfg.tracking.uri, cfg.tracking.experiment)}")
