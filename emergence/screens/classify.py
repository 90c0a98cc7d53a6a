"""From per-head selectivities to flags, primary classes and whole-model counts.

A head is flagged for class c when S_c >= threshold_c; its primary class is the
flagged class with the largest S_c / threshold_c (empty when none is flagged).
Whole-model fraction of c = flagged heads / all heads.
"""

from __future__ import annotations

from typing import Dict, Mapping, Sequence

import numpy as np
import pandas as pd

from emergence import EmergenceError
from emergence.config import HEAD_CLASSES


def check_screen(classes: Sequence[str], thresholds: Mapping[str, float]) -> None:
    for c in classes:
        if c not in HEAD_CLASSES:
            raise EmergenceError(f"unknown head class {c!r} in screen.classes; valid: {', '.join(HEAD_CLASSES)}")
    for c, t in thresholds.items():
        if c not in HEAD_CLASSES:
            raise EmergenceError(f"unknown head class {c!r} in screen.thresholds; valid: {', '.join(HEAD_CLASSES)}")
        if not (float(t) > 0):
            raise EmergenceError(f"screen.thresholds.{c}={t} must be a positive number (x over a uniform head)")
    missing = [c for c in classes if c not in thresholds]
    if missing:
        raise EmergenceError(f"no threshold for class(es) {', '.join(missing)}; set screen.thresholds.<class>")


def head_table(heads: Dict[str, np.ndarray], classes: Sequence[str],
               thresholds: Mapping[str, float]) -> pd.DataFrame:
    """One row per head: layer, head, every per-head column, flags and the primary class."""
    n_layers, n_heads = next(iter(heads.values())).shape
    layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    table = pd.DataFrame({"layer": layer.ravel(), "head": head.ravel()})
    for name, values in heads.items():
        if name.startswith("selectivity.") and name.split(".", 1)[1] not in classes:
            continue
        table[name] = values.ravel()
    ratios = []
    for c in classes:
        s = np.nan_to_num(table[f"selectivity.{c}"].to_numpy(), nan=0.0)
        flag = s >= float(thresholds[c])
        table[f"flag.{c}"] = flag.astype(int)
        ratios.append(np.where(flag, s / float(thresholds[c]), -np.inf))
    if classes:
        ratios = np.stack(ratios, axis=1)
        best = ratios.argmax(axis=1)
        table["primary"] = [classes[b] if np.isfinite(ratios[i, b]) else "" for i, b in enumerate(best)]
    else:
        table["primary"] = ""
    return table


def class_metrics(table: pd.DataFrame, classes: Sequence[str], n_layers: int) -> Dict[str, float]:
    metrics: Dict[str, float] = {"n_heads_total": float(len(table))}
    for c in classes:
        flags = table[f"flag.{c}"]
        metrics[f"count.{c}"] = float(flags.sum())
        metrics[f"fraction.{c}"] = float(flags.mean())
        metrics[f"mean_selectivity.{c}"] = float(np.nanmean(table[f"selectivity.{c}"].replace(np.inf, np.nan)))
        per_layer = flags.groupby(table["layer"]).sum()
        for layer in range(n_layers):
            metrics[f"layer{layer}.count.{c}"] = float(per_layer.get(layer, 0))
    if "first_token_attention" in table:
        metrics["mean_first_token_attention"] = float(table["first_token_attention"].mean())
    return metrics
