"""``revisions: folder``: local checkpoints, one HF model folder per revision.

``model.path`` holds ``<revision>/`` folders (each with its ``config.json``, weights and
optionally tokenizer files). The revisions are ``<model.path>/revisions.json`` when it
exists (``{"revisions": [{"name", "step", "tokens"}, ...]}``), else the ``step<N>``
sub-folders with tokens = N x ``model.tokens.tokens_per_step`` (0 when unset).
Nothing is downloaded or evicted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

from emergence import EmergenceError
from emergence import revisions as rv
from emergence.sources import Location, ModelSource, folder_bytes, model_get, size_text, tokens_per_step


class FolderSource(ModelSource):
    name = "folder"
    description = "local folders <model.path>/<revision>/ (revisions.json, else step<N>/ folders)"

    def check(self, model) -> None:
        path = model_get(model, "path")
        if not path:
            raise EmergenceError(f"model {model.name!r} has revisions: folder but no model.path")
        if not Path(path).is_dir():
            raise EmergenceError(f"model.path={path!r} does not exist; give a folder holding one "
                                 "HF model folder per revision")

    def revisions(self, model) -> List[rv.Revision]:
        self.check(model)
        return rv.folder_revisions(Path(model.path), tokens_per_step(model))

    def selection_problem(self, model, revisions: Sequence[rv.Revision]) -> Optional[str]:
        """The selected revisions whose folder (with its ``config.json``) is missing, in one line."""
        missing = [r.name for r in revisions if not (Path(model.path) / r.name / "config.json").exists()]
        if not missing:
            return None
        listed = "revisions.json lists" if (Path(model.path) / "revisions.json").exists() else "the selection names"
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        return (f"{listed} {len(missing)} revision(s) without a checkpoint folder (no config.json) under "
                f"model.path={str(model.path)!r}: {shown}; add the folders or remove them from the list")

    def locate(self, model, revision: rv.Revision, toy_dir: Optional[str] = None,
               progress: bool = True) -> Location:
        folder = Path(model.path) / revision.name
        if not (folder / "config.json").exists():
            raise EmergenceError(f"local checkpoint folder {str(folder)!r} is missing (no config.json); "
                                 f"model.path={model.path!r} must hold one HF folder per revision")
        return Location(str(folder))

    def config_location(self, model, revision: rv.Revision):
        return str(Path(model.path) / revision.name), {}

    def download_sizes(self, model, revisions: Sequence[rv.Revision]) -> Dict[str, str]:
        """``local, <size>`` for each revision folder present (nothing is downloaded)."""
        folders = {r.name: Path(model.path) / r.name for r in revisions}
        return {name: f"local, {size_text(folder_bytes(folder))}" if folder.is_dir() else "unknown"
                for name, folder in folders.items()}


SOURCE = FolderSource()
