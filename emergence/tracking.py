"""MLflow tracking: one run per (model, revision, corpus, screen), in an experiment per study.

A run is written whole or not at all: the screen is computed first, then the run is
opened and everything is logged inside it, and it is tagged ``emergence.status =
complete`` last. A job whose config hash matches a complete, FINISHED run is skipped
(unless ``force=true``), so an interrupted sweep resumes without redoing or
duplicating runs. The hash covers the model config, the revision *name*, the corpus
and the screen: the same revision screened through two selections is one run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Dict, Mapping, Optional

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from emergence.revisions import Revision

CONFIG_HASH_TAG = "emergence.config_hash"
STATUS_TAG = "emergence.status"
SWEEP_TAG = "emergence.sweep"


def config_hash(cfg: DictConfig, revision: Revision) -> str:
    identity = {
        "model": OmegaConf.to_container(cfg.model, resolve=True),
        "revision": revision.name,
        "corpus": OmegaConf.to_container(cfg.corpus, resolve=True),
        "screen": OmegaConf.to_container(cfg.screen, resolve=True),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def flatten(container: Mapping, prefix: str = "") -> Dict[str, str]:
    out: Dict[str, str] = {}
    for key, value in container.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
    return out


class Tracker:
    """The MLflow store and experiment of a study (``tracking`` config group)."""

    def __init__(self, tracking_cfg):
        import mlflow

        self.mlflow = mlflow
        self.uri = tracking_cfg.uri
        mlflow.set_tracking_uri(self.uri)
        self.client = mlflow.MlflowClient(self.uri)
        experiment = self.client.get_experiment_by_name(tracking_cfg.experiment)
        if experiment is None:
            location = Path(tracking_cfg.artifacts) / tracking_cfg.experiment
            location.mkdir(parents=True, exist_ok=True)
            self.experiment_id = self.client.create_experiment(tracking_cfg.experiment,
                                                               artifact_location=location.as_uri())
        else:
            self.experiment_id = experiment.experiment_id
        self.experiment = tracking_cfg.experiment

    def finished_run(self, digest: str):
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{CONFIG_HASH_TAG}` = '{digest}' and tags.`{STATUS_TAG}` = 'complete' "
                          "and attributes.status = 'FINISHED'",
            max_results=1)
        return runs[0] if runs else None

    def log(self, *, run_name: str, params: Mapping[str, str], metrics: Mapping[str, float],
            heads: pd.DataFrame, config_yaml: str, tags: Mapping[str, str],
            step: int = 0, extra_artifacts: Optional[Mapping[str, str]] = None) -> str:
        """Log one complete run; returns its id. The run is FAILED if anything raises."""
        mlflow = self.mlflow
        with mlflow.start_run(experiment_id=self.experiment_id, run_name=run_name) as run:
            mlflow.set_tags(dict(tags))
            mlflow.log_params(dict(params))
            mlflow.log_metrics({k: float(v) for k, v in metrics.items()}, step=step)
            mlflow.log_text(heads.to_csv(index=False), "heads.csv")
            mlflow.log_text(config_yaml, "config.yaml")
            for name, text in (extra_artifacts or {}).items():
                mlflow.log_text(text, name)
            mlflow.set_tag(STATUS_TAG, "complete")
            return run.info.run_id
