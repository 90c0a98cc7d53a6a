"""``revisions: snapshot``: a hub repo whose branch list is a committed snapshot.

The snapshot is ``emergence/snapshots/<model name>.json``, made from the hub's branch
list by ``python -m emergence.sources refresh <model>`` (``HfApi().list_repo_refs``;
tokens parsed from ``stepN-tokensXB`` branch names), or derived from the documented
schedule by ``python -m emergence.sources derive <model>``. Selection therefore works
offline and is reproducible.
"""

from __future__ import annotations

from typing import List

from emergence import EmergenceError
from emergence import revisions as rv
from emergence.sources._hub import HubSource


class SnapshotSource(HubSource):
    name = "snapshot"
    description = "hub repo, branch list from emergence/snapshots/<name>.json"

    def check(self, model) -> None:
        super().check(model)
        path = rv.snapshot_path(model.name)
        if not path.exists():
            raise EmergenceError(
                f"no revision snapshot for model {model.name!r} at {path}; make one with "
                f"`python -m emergence.sources refresh {model.name}` (needs the hub) or "
                f"`python -m emergence.sources derive {model.name}`")

    def revisions(self, model) -> List[rv.Revision]:
        self.check(model)
        return rv.read_revision_file(rv.snapshot_path(model.name))


SOURCE = SnapshotSource()
