"""From per-head selectivities to flags, primary classes and whole-model counts.

A head is flagged for class c when S_c >= threshold_c; its primary class is the
flagged class with the largest S_c / threshold_c (empty when none is flagged).
Whole-model fraction of c = flagged heads / all heads.

Every class with a selectivity column (every registered class: the reducers compute
them all) gets its flags and metrics, whatever ``screen.classes`` says: that list
only chooses what is printed. Names of metrics and columns: :mod:`emergence.common.contract`.
"""

from __future__ import annotations

from typing import Dict, List, Mapping

import numpy as np
import pandas as pd

from emergence.common import head_classes
from emergence.common.contract import (FIRST_TOKEN_COLUMN, MEAN_FIRST_TOKEN_METRIC, N_HEADS_TOTAL_METRIC,
    PRIMARY_COLUMN, column_class, count_metric, flag_column, fraction_metric, layer_count_metric,
    mean_selectivity_metric, selectivity_column)


def all_thresholds(thresholds: Mapping[str, float]) -> Dict[str, float]:
    """The threshold of every registered class: ``thresholds`` (``screen.thresholds``)
    over the registry's defaults."""
    out = head_classes.default_thresholds()
    out.update({c: float(t) for c, t in thresholds.items()})
    return out


def computed_classes(heads: Mapping[str, np.ndarray]) -> List[str]:
    """The classes with a ``selectivity.<c>`` column in ``heads``, in registry order
    (classes unknown to the registry after them)."""
    present = [column_class(k) for k in heads if k.startswith("selectivity.")]
    order = head_classes.names()
    return [c for c in order if c in present] + [c for c in present if c not in order]


def head_table(heads: Dict[str, np.ndarray], thresholds: Mapping[str, float]) -> pd.DataFrame:
    """One row per head: layer, head, every per-head column, then ``flag.<c>`` of every
    computed class and the primary class. ``thresholds`` must hold every computed class."""
    n_layers, n_heads = next(iter(heads.values())).shape
    layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    table = pd.DataFrame({"layer": layer.ravel(), "head": head.ravel()})
    for name, values in heads.items():
        table[name] = values.ravel()
    classes = computed_classes(heads)
    ratios = []
    for c in classes:
        s = np.nan_to_num(table[selectivity_column(c)].to_numpy(), nan=0.0)
        flag = s >= float(thresholds[c])
        table[flag_column(c)] = flag.astype(int)
        ratios.append(np.where(flag, s / float(thresholds[c]), -np.inf))
    if classes:
        ratios = np.stack(ratios, axis=1)
        best = ratios.argmax(axis=1)
        table[PRIMARY_COLUMN] = [classes[b] if np.isfinite(ratios[i, b]) else "" for i, b in enumerate(best)]
    else:
        table[PRIMARY_COLUMN] = ""
    return table


def class_metrics(table: pd.DataFrame, n_layers: int) -> Dict[str, float]:
    """Whole-model metrics of a head table: all heads, and per flagged class its count,
    fraction, mean selectivity (infinite values left out) and per-layer counts."""
    metrics: Dict[str, float] = {N_HEADS_TOTAL_METRIC: float(len(table))}
    for c in [column_class(k) for k in table.columns if k.startswith("flag.")]:
        flags = table[flag_column(c)]
        metrics[count_metric(c)] = float(flags.sum())
        metrics[fraction_metric(c)] = float(flags.mean())
        metrics[mean_selectivity_metric(c)] = float(
            np.nanmean(table[selectivity_column(c)].replace(np.inf, np.nan)))
        per_layer = flags.groupby(table["layer"]).sum()
        for layer in range(n_layers):
            metrics[layer_count_metric(layer, c)] = float(per_layer.get(layer, 0))
    if FIRST_TOKEN_COLUMN in table:
        metrics[MEAN_FIRST_TOKEN_METRIC] = float(table[FIRST_TOKEN_COLUMN].mean())
    return metrics
