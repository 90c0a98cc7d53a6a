"""Revisions: one training checkpoint of a model (name, step, tokens), and what is done
with lists of them: revision files (a snapshot's, a folder's ``revisions.json``), local
checkpoint folders, and the selections of ``revision.select``.

A model source's own schedule lives in its module (emergence/sources/); the command line
over them is ``python -m emergence.sources``. This module imports nothing else of the
project but ``EmergenceError``.
"""

from __future__ import annotations

import bisect
import difflib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from emergence import EmergenceError

SELECTIONS = ("logspaced", "final", "all", "named", "refine")

#: The fewest revisions a ``logspaced`` selection takes (its first and last; ``revision.k``'s bound).
MIN_LOGSPACED = 2


@dataclass(frozen=True, order=True)
class Revision:
    """One checkpoint. Ordered by (tokens, step, name)."""

    tokens: int
    step: int
    name: str

    def as_dict(self) -> dict:
        return {"name": self.name, "step": self.step, "tokens": self.tokens}


#: A revision name as a file or folder name and a Hydra override value (``revision.pin=<name>``):
#: ASCII letters, digits and ``._+-``, starting with a letter or digit; so never a path
#: (no ``/``, ``..`` or absolute name) and never something Hydra's grammar reads otherwise.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
REVISION_FILE_FORM = '{"revisions": [{"name": "step1000", "step": 1000, "tokens": 2097152000}, ...]}'


def _count(value) -> Optional[int]:
    """``value`` as a non-negative integer (an int, or a float with an integer value), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
        return None
    return int(value) if value >= 0 else None


def _entry_text(entry) -> str:
    text = json.dumps(entry) if isinstance(entry, (dict, list, str, int, float)) else repr(entry)
    return text if len(text) <= 80 else text[:77] + "..."


def read_revision_file(path: Path) -> List[Revision]:
    """The revisions a snapshot file or a folder's ``revisions.json`` lists.

    Refuses in one line naming the file and the entry (:class:`EmergenceError`): a file
    that cannot be read or is not JSON, no ``revisions`` list, an entry that is not an
    object with ``name``, ``step`` and ``tokens``, a name that is not a plain name
    (:data:`PLAIN_NAME`: a folder's revision is ``<model.path>/<name>``, so ``../x`` or an
    absolute path would leave the model folder), a step or token count that is not a
    non-negative integer, and a name listed twice."""
    path = Path(path)
    where = f"revision file {str(path)!r}"
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise EmergenceError(f"cannot read the {where}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise EmergenceError(f"{where} is not valid JSON ({str(exc).splitlines()[0]}); expected "
                             f"{REVISION_FILE_FORM}") from None
    listed = data.get("revisions") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        raise EmergenceError(f"{where} has no \"revisions\" list; expected {REVISION_FILE_FORM}")
    if not listed:
        raise EmergenceError(f"{where} lists no revisions; expected {REVISION_FILE_FORM}")
    out, seen = [], {}
    for i, entry in enumerate(listed):
        at = f"{where}, entry {i} ({_entry_text(entry)})"
        if not isinstance(entry, dict):
            raise EmergenceError(f"{at}: not an object with name, step and tokens")
        missing = [k for k in ("name", "step", "tokens") if k not in entry]
        if missing:
            raise EmergenceError(f"{at}: missing {', '.join(missing)}; every entry has name, step and tokens")
        name = entry["name"]
        if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
            raise EmergenceError(f"{at}: name {name!r} is not a plain name (letters, digits and ._+- , "
                                 "starting with a letter or digit; no path: a revision is a folder inside "
                                 "the model folder)")
        for key in ("step", "tokens"):
            if _count(entry[key]) is None:
                raise EmergenceError(f"{at}: {key}={entry[key]!r} is not a non-negative integer")
        if name in seen:
            raise EmergenceError(f"{at}: name {name!r} is listed twice (entries {seen[name]} and {i})")
        seen[name] = i
        out.append(Revision(_count(entry["tokens"]), _count(entry["step"]), name))
    return sorted(out)


def folder_revisions(path: Path, tokens_per_step: Optional[int]) -> List[Revision]:
    """Revisions of a local checkpoint folder (``revisions.json``, else ``step<N>`` sub-folders)."""
    path = Path(path)
    if not path.is_dir():
        raise EmergenceError(f"model folder {str(path)!r} does not exist; set model.path to a folder "
                             "holding one HF model folder per revision")
    listing = path / "revisions.json"
    if listing.exists():
        return read_revision_file(listing)
    found = []
    for child in path.iterdir():
        match = re.fullmatch(r"step(\d+)", child.name)
        if match and (child / "config.json").exists():
            step = int(match[1])
            found.append(Revision(step * (tokens_per_step or 0), step, child.name))
    if not found:
        raise EmergenceError(f"model folder {str(path)!r} holds no revisions.json and no step<N>/ "
                             "model folders")
    return sorted(found)


def logspaced(revisions: Sequence[Revision], k: int) -> List[Revision]:
    """K revisions log-spaced in tokens, first and last included.

    Targets are ``geomspace(t_first, t_last, K)`` over the revisions with tokens > 0
    (log 0 is undefined; a step-0 revision is left out, select it by name); each
    target takes the nearest revision in log tokens not already taken, so the
    result has exactly min(K, available) distinct revisions, ordered by tokens.
    """
    if k < MIN_LOGSPACED:
        raise EmergenceError(f"revision.k must be >= {MIN_LOGSPACED} for logspaced (got {k})")
    positive = sorted(r for r in revisions if r.tokens > 0)
    if len(positive) <= k:
        return positive
    logs = [math.log10(r.tokens) for r in positive]
    lo, hi = logs[0], logs[-1]
    chosen: List[int] = []
    for j in range(k):
        target = lo + (hi - lo) * j / (k - 1)
        free = [i for i in range(len(positive)) if i not in chosen]
        chosen.append(min(free, key=lambda i: (abs(logs[i] - target), i)))
    return [positive[i] for i in sorted(chosen)]


def nearest(revisions: Sequence[Revision], name: str, count: int = 2) -> List[str]:
    """Names of the revisions nearest to ``name`` (by step if it names one, else by spelling)."""
    match = re.match(r"step(\d+)", name)
    ordered = sorted(revisions, key=lambda r: r.step)
    if match:
        steps = [r.step for r in ordered]
        i = bisect.bisect_left(steps, int(match[1]))
        window = ordered[max(0, i - count + 1): i + count]
        window.sort(key=lambda r: abs(r.step - int(match[1])))
        return [r.name for r in window[:count]]
    return difflib.get_close_matches(name, [r.name for r in revisions], n=count, cutoff=0.0)


def select(revisions: Sequence[Revision], select: str, model: str, k: int = 10,
           name: Optional[str] = None) -> List[Revision]:
    """Apply a selection rule (``logspaced``, ``final``, ``all``, ``named``)."""
    if not revisions:
        raise EmergenceError(f"model {model!r} has no revisions")
    ordered = sorted(revisions)
    if select in ("logspaced", "refine"):  # refine starts from the log-spaced selection (emergence/refine_rule.py)
        chosen = logspaced(ordered, k)
        if not chosen:
            raise EmergenceError(f"revision={select} selects revisions log-spaced in training tokens, and all "
                                 f"{len(ordered)} revision(s) of {model!r} have 0 tokens (for local folders: no "
                                 "revisions.json and no model.tokens.tokens_per_step); set "
                                 "model.tokens.tokens_per_step=<tokens a step> or choose revision=all")
        return chosen
    if select == "final":
        return [ordered[-1]]
    if select == "all":
        return ordered
    if select == "named":
        if not name:
            raise EmergenceError("revision=named needs revision.name=<revision>")
        named = [r for r in ordered if r.name == name]
        if not named:
            near = ", ".join(nearest(ordered, name)) or "none"
            raise EmergenceError(f"unknown revision {name!r} for model {model!r}; nearest valid: {near} "
                                 f"({len(ordered)} revisions)")
        return named[:1]
    raise EmergenceError(f"unknown revision selection {select!r}; valid: {', '.join(SELECTIONS)}")


if __name__ == "__main__":  # the command line moved to emergence.sources (no import of the catalog here)
    import sys

    print("error: the revisions command is `python -m emergence.sources {show,refresh,derive} MODEL`",
          file=sys.stderr)
    sys.exit(2)
