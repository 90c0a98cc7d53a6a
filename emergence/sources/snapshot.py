"""``revisions: snapshot``: a hub repo whose branch list is a committed snapshot.

The snapshot is ``emergence/snapshots/<model name>.json``, made from the hub's branch
list by ``python -m emergence.sources refresh <model>`` (``HfApi().list_repo_refs``;
tokens parsed from ``stepN-tokensXB`` branch names), or derived from the documented
schedule by ``python -m emergence.sources derive <model>``. Selection therefore works
offline and is reproducible.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

from emergence import EmergenceError
from emergence import revisions as rv
from emergence.sources._hub import HubSource

SNAPSHOT_DIR = Path(__file__).resolve().parents[1] / "snapshots"
_BRANCH = re.compile(r"^(?:stage\d+-)?step(?P<step>\d+)-tokens(?P<tokens>\d+(?:\.\d+)?)(?P<unit>[KMBT]?)$")
_UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def parse_branch(name: str) -> Optional[rv.Revision]:
    """Parse an OLMo/OLMoE branch name ``step<N>-tokens<X><unit>``; None if not one.

    The token suffix is what the branch says (e.g. ``step20000-tokens41B`` -> 41e9);
    it is not step x a constant, so it is parsed, never computed.
    """
    match = _BRANCH.match(name)
    if match is None:
        return None
    tokens = float(match["tokens"]) * _UNITS[match["unit"]]
    return rv.Revision(int(round(tokens)), int(match["step"]), name)


def revisions_from_branches(branches: Iterable[str]) -> List[rv.Revision]:
    """Revisions from a hub branch list; branches that are not checkpoints (``main``) are skipped."""
    parsed = (parse_branch(b) for b in branches)
    return sorted(r for r in parsed if r is not None)


#: Documented checkpoint schedules (METHODS section 2), used to derive a snapshot
#: where the hub cannot be reached. Keys are model names (files of conf/model/).
DERIVED_SCHEDULES = {
    # OLMoE: every 5000 steps, step5000-tokens20B .. step1220000-tokens5117B, 4,194,304 tokens a step.
    "olmoe_1b_7b_0924": dict(start=5000, stop=1220000, every=5000, tokens_per_step=4_194_304),
    # OLMo-1B-0724: ~1000-step interval to step1454000-tokens3048B; the tokens a step is
    # fitted to the final branch (3048B / 1,454,000 steps). The hub list has gaps and
    # extras that a derived list cannot know: refresh from the hub when you can.
    "olmo_1b_0724": dict(start=1000, stop=1454000, every=1000, tokens_per_step=3048e9 / 1454000),
    # OLMo 2 7B (allenai/OLMo-2-1124-7B), pretraining stage 1: branches stage1-stepN-tokensXB every 1000
    # steps to the last, stage1-step928646-tokens3896B; 4,194,304 tokens a step (1024 x 4096), the
    # billions rounded UP (stage1-step928000-tokens3893B, step865000-tokens3629B, step150-tokens1B as
    # listed by the hub). Steps the hub lacks (a maintainers' thread lists 100000, 174000, 317000, 536000,
    # 605000, 632000, 672000) are left out; the stage 2 (mid-training) branches are not listed.
    "olmo2_7b": dict(start=1000, stop=928000, every=1000, tokens_per_step=4_194_304, prefix="stage1-",
                     rounding="ceil", final=928646, missing=(100000, 174000, 317000, 536000, 605000, 632000,
                                                             672000)),
    # OLMo 2 1B (allenai/OLMo-2-0425-1B), stage 1, 4T tokens: the same naming; NOT CONFIRMED here: 2,097,152
    # tokens a step (512 x 4096) and the last branch stage1-step1907359-tokens4001B. Refresh from the hub.
    "olmo2_1b": dict(start=1000, stop=1907000, every=1000, tokens_per_step=2_097_152, prefix="stage1-",
                     rounding="ceil", final=1907359),
}


def derived_revisions(model: str) -> List[rv.Revision]:
    """The revisions a documented schedule (:data:`DERIVED_SCHEDULES`) gives ``model``."""
    try:
        sched = DERIVED_SCHEDULES[model]
    except KeyError:
        raise EmergenceError(
            f"no documented checkpoint schedule for model {model!r}; known: {sorted(DERIVED_SCHEDULES)}"
        ) from None
    out = []
    steps = [s for s in range(sched["start"], sched["stop"] + 1, sched["every"]) if s not in sched.get("missing", ())]
    for step in steps + ([sched["final"]] if sched.get("final") else []):
        tokens = step * sched["tokens_per_step"]
        billions = math.ceil(tokens / 10**9) if sched.get("rounding") == "ceil" else int(tokens // 10**9)
        out.append(parse_branch(f"{sched.get('prefix', '')}step{step}-tokens{billions}B"))
    return out


def snapshot_path(model: str) -> Path:
    return SNAPSHOT_DIR / f"{model}.json"


def write_snapshot(model: str, repo: str, revisions: Sequence[rv.Revision], source: str, note: str = "",
                   path: Optional[Path] = None) -> Path:
    """Write the snapshot file (one revision a line), atomically."""
    path = path or snapshot_path(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = {"model": model, "repo": repo, "source": source, "created": _dt.date.today().isoformat(), "note": note}
    head = json.dumps(fields, indent=1)[:-2]  # drop the closing brace, keep the fields
    rows = ",\n".join("  " + json.dumps(r.as_dict()) for r in sorted(revisions))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(f'{head},\n "revisions": [\n{rows}\n ]\n}}\n')
    tmp.replace(path)
    return path


def refresh(model: str, repo: str, path: Optional[Path] = None) -> Path:
    """Fetch the hub's branch list with ``HfApi().list_repo_refs`` and store it as a snapshot."""
    from huggingface_hub import HfApi

    try:
        branches = [b.name for b in HfApi().list_repo_refs(repo).branches]
    except Exception as exc:  # offline, unknown repo, auth
        raise EmergenceError(
            f"cannot list the branches of {repo!r} ({type(exc).__name__}: {exc}); run this command on a "
            "machine that reaches the hub (and unset HF_HUB_OFFLINE); the current snapshot is kept"
        ) from None
    revisions = revisions_from_branches(branches)
    if not revisions:
        raise EmergenceError(f"{repo!r} has no stepN-tokensXB branches ({len(branches)} branches seen)")
    return write_snapshot(model, repo, revisions, source="hub",
                          note=f"list_repo_refs({repo!r}).branches, {len(branches)} branches", path=path)


class SnapshotSource(HubSource):
    name = "snapshot"
    description = "hub repo, branch list from emergence/snapshots/<name>.json"

    def check(self, model) -> None:
        super().check(model)
        path = snapshot_path(model.name)
        if not path.exists():
            raise EmergenceError(
                f"no revision snapshot for model {model.name!r} at {path}; make one with "
                f"`python -m emergence.sources refresh {model.name}` (needs the hub) or "
                f"`python -m emergence.sources derive {model.name}`")

    def revisions(self, model) -> List[rv.Revision]:
        self.check(model)
        return rv.read_revision_file(snapshot_path(model.name))


SOURCE = SnapshotSource()
