"""A Hydra sweeper that turns revision selections into one job per revision.

It is Hydra's basic sweeper (cartesian product of ``a,b,c`` overrides) with one
addition: each job whose ``revision`` config selects several revisions
(``revision=logspaced``, ``revision=all``) is expanded into one job per selected
revision, pinned with ``revision.pin=<name>``. So

    python -m emergence -m model=pythia_1b,olmo_1b_0724 revision=logspaced

launches 2 x 10 jobs, each one MLflow run, and composes with sweeps over corpus and
screen. Selected in ``conf/config.yaml`` as ``override hydra/sweeper: revisions``.

It lives in the ``hydra_plugins`` namespace package because Hydra instantiates
sweepers only from there.
"""


import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore

from emergence import EmergenceError


@dataclass
class RevisionSweeperConf:
    _target_: str = "hydra_plugins.emergence_sweeper.revision_sweeper.RevisionSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="revisions", node=RevisionSweeperConf,
                             provider="emergence")


class RevisionSweeper(BasicSweeper):
    def _expand(self, overrides: Sequence[str]) -> List[List[str]]:
        from emergence.registry import selected_revisions

        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        if cfg.revision.pin is not None:
            return [list(overrides)]
        revisions = selected_revisions(cfg.model, cfg.revision)
        if len(revisions) < 2:
            return [list(overrides)]
        return [list(overrides) + [f"revision.pin={r.name}"] for r in revisions]

    def get_job_batch(self) -> Sequence[Sequence[str]]:
        batch = super().get_job_batch()
        try:
            return [job for overrides in batch for job in self._expand(overrides)]
        except EmergenceError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
