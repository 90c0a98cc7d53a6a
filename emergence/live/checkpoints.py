"""The checkpoints a live monitor saves: ordinary HF model folders and their ``revisions.json``.

Layout (what ``model.revisions: folder`` reads, emergence/sources/folder.py)::

    <folder>/<name>/        config.json + model.safetensors: one HF model folder per checkpoint
    <folder>/revisions.json {"revisions": [{"name", "step", "tokens"}, ...], "complete": false, ...}

``revisions.json`` is rewritten atomically after every save (``complete`` turns true when training
ends); a folder is written to ``.tmp-<name>-<pid>`` and renamed into place, so a checkpoint listed
is always whole. With ``writes_current=False`` (the HF ``Trainer``, which writes its own
``checkpoint-<N>`` folders) :class:`CheckpointFolder` only records them, and writes only the
lookback copies.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Dict, List, Optional

from emergence.common.atomic import write_atomic
from emergence.common.progress import quiet_hf_bars
from emergence.toy.train import REVISIONS_FILE


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as the JSON file ``path``, whole or not at all
    (:func:`~emergence.common.atomic.write_atomic`)."""
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(data, indent=1)))


class CheckpointFolder:
    """A growing suite of checkpoints in ``folder``, named ``name_format.format(step=N)``."""

    def __init__(self, folder, name_format: str = "step{step}", writes_current: bool = True,
                 listing_extra: Optional[Dict] = None):
        self.folder = Path(folder)
        self.name_format = name_format
        self.writes_current = writes_current
        self.listing_extra = dict(listing_extra or {})
        self.revisions: List[Dict] = []

    def name(self, step: int) -> str:
        return self.name_format.format(step=int(step))

    def steps(self) -> List[int]:
        return [int(r["step"]) for r in self.revisions]

    def write(self, model, step: int, tokens: int, state_dict=None, config=None) -> str:
        """Write ``model`` (or ``state_dict`` with ``config``: a held copy) as the checkpoint of
        ``step``, atomically, and record it. Returns its name."""
        name = self.name(step)
        self.folder.mkdir(parents=True, exist_ok=True)

        def save(tmp: Path) -> None:
            if tmp.exists():
                shutil.rmtree(tmp)
            with quiet_hf_bars():
                model.save_pretrained(tmp, state_dict=state_dict)
            if config is not None:  # the config as it was when the held weights were screened
                config.save_pretrained(tmp)

        write_atomic(self.folder / name, save)  # replaces a leftover of a session that died after the rename
        self.record(step, tokens)
        return name

    def record(self, step: int, tokens: int) -> str:
        """List the checkpoint of ``step`` (written by us or by the trainer) in ``revisions.json``."""
        name = self.name(step)
        if all(r["name"] != name for r in self.revisions):
            self.revisions.append({"name": name, "step": int(step), "tokens": int(tokens)})
            self.revisions.sort(key=lambda r: (r["tokens"], r["step"]))
        self.write_listing()
        return name

    def write_listing(self, complete: bool = False) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        data = {"revisions": self.revisions, **self.listing_extra, "complete": bool(complete)}
        write_json_atomic(self.folder / REVISIONS_FILE, data)

    def restore(self, revisions: List[Dict], after_step: int, delete_later: bool = True) -> None:
        """Resume: keep ``revisions`` (those saved up to ``after_step``), delete left-over
        ``.tmp-*`` folders and (``delete_later``) the checkpoint folders of later steps that the
        interrupted session wrote, and rewrite the listing."""
        self.revisions = [dict(r) for r in revisions]
        pattern = re.compile("^" + re.escape(self.name_format).replace(re.escape("{step}"), r"(\d+)") + "$")
        for child in self.folder.iterdir() if self.folder.is_dir() else ():
            match = pattern.match(child.name)
            if child.name.startswith(".tmp-"):
                shutil.rmtree(child) if child.is_dir() else child.unlink()
            elif delete_later and match and int(match[1]) > after_step and child.is_dir():
                shutil.rmtree(child)
        self.write_listing()
