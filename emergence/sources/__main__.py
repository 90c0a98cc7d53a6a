"""``python -m emergence.sources ACTION MODEL``: a model's revisions and its snapshot.

- ``show MODEL``: every revision of the model (its source's list), with step and tokens.
- ``refresh MODEL``: store the hub's branch list as the model's snapshot
  (``HfApi().list_repo_refs``; needs the hub).
- ``derive MODEL``: write the snapshot from the documented checkpoint schedule (offline).
- ``repos MODEL``: the repos of a seed-suite model (``polypythia``): size, seed kind, seed,
  repo and its branch count, offline.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from emergence import EmergenceError
from emergence.catalog import load_model_config, model_revisions
from emergence.sources import polypythia, snapshot, source_for


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m emergence.sources",
        description="Revisions of a registered model: 'show MODEL' lists them; 'refresh MODEL' stores the "
                    "hub's branch list as its snapshot; 'derive MODEL' writes one from the documented schedule.")
    parser.add_argument("action", choices=["show", "refresh", "derive", "repos"])
    parser.add_argument("model", help="model name (a file of conf/model/), e.g. olmo_1b_0724 (see conf/model/)")
    args = parser.parse_args(argv)
    try:
        spec = load_model_config(args.model)
        if args.action in ("refresh", "derive") and not isinstance(source_for(spec), snapshot.SnapshotSource):
            raise EmergenceError(f"model {spec.name!r} has revisions: {spec.revisions}; {args.action} writes the "
                                 "snapshot of a revisions: snapshot model")
        if args.action == "repos":
            if not isinstance(source_for(spec), polypythia.PolyPythiaSource):
                raise EmergenceError(f"model {spec.name!r} has revisions: {spec.revisions}; repos lists the runs of a "
                                     "seed suite (revisions: polypythia)")
            branches = len(model_revisions(spec))
            for size, kind, seed, repo in polypythia.suite_repos():
                print(f"{size}\t{kind}\t{seed}\t{repo}\t{branches} branches")
        elif args.action == "refresh":
            print(snapshot.refresh(spec.name, spec.repo))
        elif args.action == "derive":
            print(snapshot.write_snapshot(spec.name, spec.repo, snapshot.derived_revisions(spec.name), source="derived",
                                    note="derived from the documented checkpoint schedule (METHODS section "
                                         "2); replace with `python -m emergence.sources refresh "
                                         f"{spec.name}` where the hub is reachable"))
        else:
            for r in model_revisions(spec):
                print(f"{r.name}\t{r.step}\t{r.tokens}")
    except EmergenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
