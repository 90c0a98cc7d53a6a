"""What the MLflow UI reads, so that a study opens where a researcher looks for it.

Read from the JS bundle of the installed MLflow (3.17.2, ``mlflow/server/js/build``) and
checked in headless Chromium (``scripts/check_mlflow_ui.py``, docs/checks.md):

- **The landing tab follows the sidebar's "GenAI | Model training" switch**, not a tag of
  the experiment: the URL parameter ``workflowType``, else the browser's own setting
  (localStorage ``mlflow.workflowType``, default ``genai``). No tag and no server setting
  changes that default (MLflow issue #24498), so every URL this tool prints carries
  ``workflowType=machine_learning`` (:func:`experiment_url`), and ``python -m emergence.ui``
  (emergence/ui_app.py) sets the switch itself where the browser has none.
- ``mlflow.experimentKind = custom_model_development`` (:data:`EXPERIMENT_KIND_TAG`): read for
  the landing tab only where the switch is disabled (older MLflow 3), shown as the experiment's
  type; set on every experiment the tool creates or reuses.
- ``mlflow.experiment.primaryMetric.name`` (:data:`PRIMARY_METRIC_TAG`): the metric the UI
  charts first in an experiment's default charts.
- **A saved view** is the experiment tag ``mlflow.sharedViewState.<key>``, the JSON
  ``{"name", "createdAt", "updatedAt", "state"}`` whose ``state`` is the JSON of the runs
  page's facets and UI state; the UI lists it under "Views" and opens it at
  ``runs?viewStateShareKey=<key>``. The curves view (:func:`curves_view`, :func:`view_url`)
  charts the screen runs **grouped by model** (each run holds one point at step = tokens, so a
  group's line is the model's curve); the runs-table view (:func:`runs_view`, opened by
  :func:`experiment_url`) lists the screen runs alone, one row each (a parent run would
  otherwise collapse them).
"""

from __future__ import annotations

import json
from typing import Dict, List, Mapping, Optional
from urllib.parse import urlencode

from emergence.common.contract import (EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, INDUCTION_LOSS_METRIC, KIND_TAG,
    MEAN_FIRST_TOKEN_METRIC, MODEL_TAG, REVISION_TAG, TOKENS_METRIC, count_metric, fraction_metric)

PRIMARY_METRIC_TAG = "mlflow.experiment.primaryMetric.name"
PRIMARY_METRIC = fraction_metric("bos")
#: The tool's saved view: its key (the tag is ``mlflow.sharedViewState.<key>``) and name.
VIEW_KEY = "emergence-curves"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
VIEW_NAME = "fraction.bos against tokens, per model"
#: The view's createdAt/updatedAt (ms): fixed, so that a rewrite is seen as the tool's own; a
#: view the user saved over in the UI has another updatedAt and is left alone.
VIEW_STAMP = 1764806400000  # 2025-12-04
#: The metrics the view charts against tokens, one chart each.
VIEW_CHARTS = (fraction_metric("bos"), fraction_metric("induction"), count_metric("bos"), count_metric("induction"),
               MEAN_FIRST_TOKEN_METRIC, INDUCTION_LOSS_METRIC)
#: The runs table's columns in the views: model, revision, tokens and the key metrics.
VIEW_COLUMNS = ((f"tags.`{MODEL_TAG}`", f"tags.`{REVISION_TAG}`", f"metrics.`{TOKENS_METRIC}`")
                + tuple(f"metrics.`{m}`" for m in VIEW_CHARTS))
#: The tool's second saved view, the one the printed runs-table URL opens (:func:`runs_view`).
RUNS_VIEW_KEY = "emergence-runs"
RUNS_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW_KEY}"
RUNS_VIEW_NAME = "screen runs: model, revision, tokens, key metrics"
#: Where ``mlflow ui`` serves when it is given no --host/--port.
DEFAULT_UI = "http://127.0.0.1:5000"
#: The sidebar switch's "Model training" value, and the browser's localStorage key that holds it
#: (the UI's versioned storage: ``<key>_v<version>``, a JSON value).
WORKFLOW_TRAINING = "machine_learning"
WORKFLOW_STORAGE_KEY = "mlflow.workflowType_v1"


def _line_chart(metric: str, section: str) -> dict:
    """One line chart of the runs page (the UI's RunsChartsLineCardConfig): ``metric`` against
    the step (= tokens) on a log axis, points drawn."""
    return {"uuid": f"{VIEW_KEY}-{metric}", "type": "LINE", "runsCountToCompare": 100, "metricSectionId": section,
            "deleted": False, "isGenerated": False, "displayName": f"{metric} against tokens", "metricKey": metric,
            "selectedMetricKeys": [metric], "lineSmoothness": 0, "xAxisScaleType": "log", "scaleType": "linear",
            "range": {}, "xAxisKey": "step", "selectedXAxisMetricKey": "", "displayPoints": True, "yAxisKey": "metric",
            "yAxisExpressions": [], "ignoreOutliers": False, "useGlobalXaxisKey": False,
            "useGlobalLineSmoothing": False}


def _screen_runs(**state) -> dict:
    """A view's state: the screen runs, the columns of :data:`VIEW_COLUMNS`, and ``state``."""
    return {"searchFilter": f"tags.`{KIND_TAG}` = 'screen'", "selectedColumns": list(VIEW_COLUMNS),
            "runsHiddenMode": "SHOW_ALL", "isAccordionReordered": False, "viewMaximized": False,
            "runListHidden": False, **state}


def curves_view() -> dict:
    """The state of the curves view (see the module notes): the screen runs grouped by model and
    the charts against tokens."""
    section = f"{VIEW_KEY}-section"
    return _screen_runs(
        orderByKey="attributes.start_time", orderByAsc=False,
        groupBy={"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": MODEL_TAG}]},
        groupsExpanded={}, useGroupedValuesInCharts=True, hideEmptyCharts=True,
        compareRunCharts=[_line_chart(m, section) for m in VIEW_CHARTS],
        compareRunSections=[{"uuid": section, "name": "Against tokens (step = tokens), one line per model",
                             "display": True, "isReordered": False}])


def runs_view() -> dict:
    """The state of the runs-table view (:data:`RUNS_VIEW_KEY`): the screen runs, ungrouped, sorted by tokens."""
    return _screen_runs(orderByKey=f"metrics.`{TOKENS_METRIC}`", orderByAsc=True, groupBy=None, groupsExpanded={})


def _envelope(name: str, state: dict) -> str:
    """A saved view's tag value: the envelope the UI parses (its ``state`` a JSON string), compact
    (about 4 kB: older MLflow servers take experiment tag values up to 5000 characters)."""
    compact = {"sort_keys": True, "separators": (",", ":")}
    return json.dumps({"name": name, "createdAt": VIEW_STAMP, "updatedAt": VIEW_STAMP,
                       "state": json.dumps(state, **compact)}, **compact)


def view_tag_value() -> str:
    """The curves view's tag value (:func:`curves_view`)."""
    return _envelope(VIEW_NAME, curves_view())


def _ours(value: Optional[str]) -> bool:
    """Whether a view tag is the tool's own (never saved over in the UI)."""
    try:
        return json.loads(value or "").get("updatedAt") == VIEW_STAMP
    except (ValueError, AttributeError):
        return False


def tags_to_set(current: Mapping[str, str]) -> Dict[str, str]:
    """The tags to write on an experiment that has the tags ``current`` (``{}`` for a new one):
    the kind, unless it is set; the primary metric when it has none; the view when it is absent or
    is the tool's own in an older form (a view the user saved over is kept)."""
    out = {}
    if current.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
        out[EXPERIMENT_KIND_TAG] = EXPERIMENT_KIND
    if not current.get(PRIMARY_METRIC_TAG):
        out[PRIMARY_METRIC_TAG] = PRIMARY_METRIC
    for tag, view in ((VIEW_TAG, view_tag_value()), (RUNS_VIEW_TAG, _envelope(RUNS_VIEW_NAME, runs_view()))):
        if current.get(tag) != view and (tag not in current or _ours(current.get(tag))):
            out[tag] = view
    return out


def _runs_url(tracking_uri: str, experiment_id: str, base: Optional[str], **params) -> str:
    """The experiment's runs page with ``params`` and ``workflowType=machine_learning`` (see the
    module notes), at the UI ``base``: by default a tracking server's own UI, or for a local store
    ``mlflow ui --backend-store-uri <uri>`` at :data:`DEFAULT_UI`."""
    if not base:  # None or empty: the default UI
        base = tracking_uri.rstrip("/") if tracking_uri.startswith(("http://", "https://")) else DEFAULT_UI
    query = urlencode({**params, "workflowType": WORKFLOW_TRAINING})
    return f"{base}/#/experiments/{experiment_id}/runs?{query}"


def experiment_url(tracking_uri: str, experiment_id: str, base: Optional[str] = None) -> str:
    """The experiment's runs table in the runs-table view (:data:`RUNS_VIEW_KEY`)."""
    return _runs_url(tracking_uri, experiment_id, base, viewStateShareKey=RUNS_VIEW_KEY)


def view_url(tracking_uri: str, experiment_id: str, base: Optional[str] = None) -> str:
    """The tool's saved view, opened on its charts."""
    return _runs_url(tracking_uri, experiment_id, base, viewStateShareKey=VIEW_KEY, compareRunsMode="CHART")


def experiment_id(tracking_uri: str, experiment: str) -> Optional[str]:
    """The id of ``experiment`` in the store; None when it has none or cannot be read."""
    import mlflow

    try:
        exp = mlflow.MlflowClient(tracking_uri).get_experiment_by_name(experiment)
    except Exception:  # noqa: BLE001  (the store failed or does not exist yet: the rest is still worth printing)
        return None
    return None if exp is None else exp.experiment_id


def link_lines(tracking_uri: str, experiment_id: str, base: Optional[str] = None) -> List[str]:
    """The printed links to the experiment's runs table and to its curves."""
    return [f"  runs table: {experiment_url(tracking_uri, experiment_id, base)}",
            f"  curves against tokens, one line per model: {view_url(tracking_uri, experiment_id, base)}"]


def open_lines(tracking_uri: str, experiment: str) -> str:
    """How to open the study (printed at the end of a job and a sweep): the UI command for a
    local store, the runs table and the saved view's charts; the ids read from the store."""
    lines = ["  python -m emergence.ui   (starts the UI on this store, prints these links and the latest report)"]
    if not tracking_uri.startswith(("http://", "https://")):
        lines.append(f"  or: mlflow ui --backend-store-uri {tracking_uri}")
    exp = experiment_id(tracking_uri, experiment)
    if exp is not None:
        lines += link_lines(tracking_uri, exp)
    return "\n".join(lines)
