"""Hub sources: revisions are branches of a Hugging Face hub repo (``model.repo``).

Shared by ``pythia`` and ``snapshot`` (they differ in how the revision list is known).
A revision is fetched with ``huggingface_hub.snapshot_download`` (only config, weights
and tokenizer; resumes an interrupted download, shows progress) into the HF cache, and
evicted from it with ``scan_cache_dir().delete_revisions`` when ``cache.evict=true``.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Dict, Optional, Sequence

from emergence import EmergenceError
from emergence.revisions import Revision, nearest
from emergence.sources import Location, ModelSource, model_get, size_text

#: Files a screen needs from a hub revision besides the weights.
CONFIG_PATTERNS = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json"]
SAFETENSORS_PATTERNS = ["*.safetensors", "*.safetensors.index.json"]
BIN_PATTERNS = ["pytorch_model*.bin", "pytorch_model.bin.index.json"]


def screen_patterns(filenames: Optional[Sequence[str]] = None) -> list[str]:
    """``allow_patterns`` for ``snapshot_download``: config and tokenizer files plus one weight
    format (safetensors when the revision has them, else ``pytorch_model*.bin``; both when the
    file list is unknown, e.g. offline, where only what is cached is read anyway)."""
    if filenames is None:
        return CONFIG_PATTERNS + SAFETENSORS_PATTERNS + BIN_PATTERNS
    has_safetensors = any(f.endswith(".safetensors") for f in filenames)
    return CONFIG_PATTERNS + (SAFETENSORS_PATTERNS if has_safetensors else BIN_PATTERNS)


class HubUnreachable(EmergenceError):
    """A hub revision neither cached nor downloadable now (offline, or the hub does not answer):
    every later revision would fail alike, so the job stops at the first (emergence/screening.py)."""


@functools.cache
def hub_problem() -> Optional[str]:
    """Why the hub cannot be used now (``HF_HUB_OFFLINE`` set, or no answer from ``HF_ENDPOINT``
    within :data:`HUB_TIMEOUT_S`, one try), or None when it answers. Asked once a process."""
    import urllib.error
    import urllib.request

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    try:
        urllib.request.urlopen(urllib.request.Request(constants.ENDPOINT, method="HEAD"), timeout=HUB_TIMEOUT_S)
    except urllib.error.HTTPError:  # an HTTP answer, even an error status: the hub is there
        return None
    except Exception as exc:  # noqa: BLE001  (refused, unresolvable, timed out)
        reason = getattr(exc, "reason", exc)
        return f"{constants.ENDPOINT} did not answer ({reason})"
    return None


def offline_message(repo: str, revision: str, exc: Optional[Exception] = None) -> str:
    """One line for a hub revision that is neither cached nor downloadable now."""
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
    why = "HF_HUB_OFFLINE is set" if offline else (hub_problem() or "the hub could not be reached")
    cause = f" ({type(exc).__name__})" if exc is not None else ""
    return (f"{repo} at revision {revision!r} is not in the local HF cache and {why}"
            f"{cause}. Download it where the hub is reachable with "
            f"`hf download {repo} --revision {revision}` (then copy the HF cache here), or set "
            f"model.revisions=folder and model.path to a local folder holding <revision>/ model folders")


def missing_revision_message(repo: str, revision: str, known: Sequence[Revision]) -> str:
    near = ", ".join(nearest(known, revision)) if known else "see `python -m emergence.sources show MODEL`"
    return f"revision {revision!r} of {repo} does not exist on the hub; nearest valid: {near}"


def evict(repo: str, revision: str) -> int:
    """Delete ``repo`` at ``revision`` from the HF cache; returns the bytes freed (0 if absent)."""
    from huggingface_hub import scan_cache_dir

    try:
        cache = scan_cache_dir()
    except Exception:  # noqa: BLE001  (no cache folder yet)
        return 0
    hashes = [r.commit_hash for info in cache.repos if info.repo_id == repo
              for r in info.revisions if revision in r.refs or r.commit_hash == revision]
    if not hashes:
        return 0
    strategy = cache.delete_revisions(*hashes)
    strategy.execute()
    return int(strategy.expected_freed_size)


def hub_file(repo: str, revision: str, filename: str) -> str:
    """Download one file of ``repo`` at ``revision`` (one try, no retries: ``etag_timeout`` short),
    or raise the one-line :class:`EmergenceError` saying what failed and what to do."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import RepositoryNotFoundError, RevisionNotFoundError

    if hub_problem():  # one probe, not huggingface_hub's retries per file and revision
        raise HubUnreachable(offline_message(repo, revision))
    try:
        return hf_hub_download(repo, filename, revision=revision, etag_timeout=HUB_TIMEOUT_S)
    except RevisionNotFoundError:
        raise EmergenceError(missing_revision_message(repo, revision, ())) from None
    except RepositoryNotFoundError:
        raise EmergenceError(f"model repo {repo!r} does not exist on the hub (or needs a token); "
                             "check model.repo") from None
    except Exception as exc:  # noqa: BLE001  (offline mode, connection refused, timeouts)
        raise HubUnreachable(offline_message(repo, revision, exc)) from None


#: Seconds a hub request may take before the hub counts as unreachable.
HUB_TIMEOUT_S = 5


class HubSource(ModelSource):
    """Revisions are branches of ``model.repo`` on the hub (``model.path`` is not read); a
    subclass may compute the repo instead (:meth:`repo`)."""

    evictable = True

    def repo(self, model) -> str:
        """The hub repo id of ``model``'s revisions: ``model.repo``."""
        return model_get(model, "repo")

    def check(self, model) -> None:
        if not model_get(model, "repo"):
            raise EmergenceError(f"model {model.name!r} has revisions: {self.name} but no model.repo "
                                 "(the hub repo id)")
        self.refuse_path(model)

    def refuse_path(self, model) -> None:
        """A hub source reads no ``model.path``: one given is refused."""
        if model_get(model, "path"):
            raise EmergenceError(f"model {model.name!r} has revisions: {self.name}, which reads the hub, and "
                                 f"model.path={model.path!r}; for local checkpoint folders set "
                                 "model.revisions=folder")

    def locate(self, model, revision: Revision, toy_dir: Optional[str] = None,
               progress: bool = True) -> Location:
        if not self.repo(model):
            raise EmergenceError(f"model {model.name!r} names no model.repo")
        return Location(self.repo(model), revision.name)

    def fetch(self, model, revision: Revision, known: Sequence[Revision] = (), toy_dir: Optional[str] = None,
              progress: bool = True) -> str:
        """``snapshot_download(repo, revision=..., allow_patterns=screen_patterns(...))`` into
        the HF cache; errors become one-line :class:`EmergenceError` s (revision missing: the
        nearest valid ones; offline or unreachable: what to do)."""
        repo, rev = self.locate(model, revision).where, revision.name
        from huggingface_hub import HfApi, snapshot_download
        from huggingface_hub.utils import (RepositoryNotFoundError, RevisionNotFoundError, disable_progress_bars,
                                           enable_progress_bars)

        (enable_progress_bars if progress else disable_progress_bars)()
        if hub_problem():  # the cache only: no retries against a hub that does not answer
            try:
                return snapshot_download(repo, revision=rev, allow_patterns=screen_patterns(None),
                                         local_files_only=True)
            except Exception as exc:  # noqa: BLE001  (not cached)
                raise HubUnreachable(offline_message(repo, rev, exc)) from None
        try:
            try:
                files = HfApi().list_repo_files(repo, revision=rev)
            except (RevisionNotFoundError, RepositoryNotFoundError):
                raise
            except Exception:  # noqa: BLE001  (offline or unreachable: the cache decides below)
                files = None
            return snapshot_download(repo, revision=rev, allow_patterns=screen_patterns(files))
        except RevisionNotFoundError:
            raise EmergenceError(missing_revision_message(repo, rev, known)) from None
        except RepositoryNotFoundError:
            raise EmergenceError(f"model repo {repo!r} does not exist on the hub (or needs a token); "
                                 f"check model.repo of {model.name!r}") from None
        except Exception as exc:  # noqa: BLE001  (LocalEntryNotFound, offline mode, connection errors)
            raise HubUnreachable(offline_message(repo, rev, exc)) from None

    def label(self, model, revision: Revision, folder: str) -> str:
        return f"{self.repo(model)}@{revision.name}"

    def config_location(self, model, revision: Revision):
        return self.repo(model), {"revision": revision.name, "local_files_only": True}

    def read_config(self, model, revision: Revision, network: bool = False) -> Optional[dict]:
        """``config.json`` of the revision from the local HF cache, else (``network``) from the hub:
        one small file, one try (:func:`hub_file`); an unreachable hub is :class:`EmergenceError`
        (:func:`offline_message`), so a job stops at its first revision in one line."""
        import json

        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(self.repo(model), "config.json", revision=revision.name)
        path = path if isinstance(path, str) else None
        if path is None and network:
            path = hub_file(self.repo(model), revision.name, "config.json")
        return json.loads(open(path).read()) if path else None

    def download_sizes(self, model, revisions: Sequence[Revision]) -> Dict[str, str]:
        """``cached, <size>`` for a revision the local HF cache holds (its size on disk, i.e.
        what a screen would otherwise download), else ``download (hub answered)`` or
        ``download; hub unreachable: <why>``. Reads the disk (``huggingface_hub.scan_cache_dir``)
        and asks the hub once whether it answers (:func:`hub_problem`)."""
        problem = hub_problem()
        missing = "download (hub answered)" if problem is None else "download; hub unreachable"
        if problem is not None:
            print(f"note: the hub is unreachable ({problem}): only revisions in the local HF cache can be screened",
                  file=sys.stderr)
        out = {r.name: missing for r in revisions}
        from huggingface_hub import scan_cache_dir

        try:
            cache = scan_cache_dir()
        except Exception:  # noqa: BLE001  (no cache folder yet)
            return out
        for info in cache.repos:
            if info.repo_id != self.repo(model):
                continue
            for cached in info.revisions:
                for r in revisions:
                    if r.name in cached.refs or cached.commit_hash == r.name:
                        out[r.name] = f"cached, {size_text(cached.size_on_disk)}"
        return out

    def evict(self, model, revision: Revision) -> int:
        return evict(self.repo(model), revision.name)


class SeedSuiteSource(HubSource):
    """A hub seed suite: the repo of a run is computed from ``model.size`` and ``model.seed``."""

    #: The keys a run is picked with, as a message shows them (``model.size=small model.seed=21``).
    example = ""

    def check(self, model) -> None:
        """A run needs ``model.size`` and ``model.seed`` (subclasses add what else they refuse)."""
        for key in ("size", "seed"):
            if model_get(model, key) is None:
                raise EmergenceError(f"model {model.name!r} has revisions: {self.name} but no model.{key} "
                                     f"(e.g. {self.example})")

    def download_sizes(self, model, revisions: Sequence[Revision]) -> Dict[str, str]:
        """The HF cache's answer (:meth:`HubSource.download_sizes`), naming the run's repo."""
        repo = self.repo(model)
        return {name: f"{repo}: {size}" for name, size in super().download_sizes(model, revisions).items()}
