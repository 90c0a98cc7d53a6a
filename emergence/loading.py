"""Load a model at a revision: ``from_pretrained(repo or folder, revision=...)``, eager attention.

- Hub models: ``AutoModelForCausalLM.from_pretrained(repo, revision=name)``.
- Local checkpoint folders (``model.path``) and the toy suite: ``<folder>/<revision>/``.
- dtype ``auto``: float32 on the CPU; on an accelerator bfloat16 for OLMo/OLMoE and
  float32 for GPT-NeoX. float16 is refused for GPT-NeoX (Pythia was trained in fp16
  with large Q/K biases; its attention overflows there).
- ``cache.evict=true`` deletes a screened hub revision from the HF cache afterwards.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import torch

from emergence import EmergenceError
from emergence.adapters import ArchitectureAdapter, adapter_for
from emergence.revisions import Revision, nearest

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: Optional[object]
    adapter: ArchitectureAdapter
    source: str  # repo@revision or folder
    device: torch.device
    dtype: torch.dtype


def choose_device(name: str = "auto") -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        return torch.device(name)
    except RuntimeError:
        raise EmergenceError(f"unknown device {name!r}; valid: auto, cpu, cuda, cuda:<i>, mps") from None


def choose_dtype(family: str, requested: str, device: torch.device) -> torch.dtype:
    if requested == "auto":
        if device.type == "cpu" or family == "gpt_neox":
            return torch.float32
        return torch.bfloat16
    if requested not in DTYPES:
        raise EmergenceError(f"unknown dtype {requested!r}; valid: auto, {', '.join(DTYPES)}")
    if family == "gpt_neox" and requested == "float16":
        raise EmergenceError("dtype float16 is refused for gpt_neox (Pythia's Q/K biases overflow in fp16); "
                             "valid: auto, float32, bfloat16")
    return DTYPES[requested]


def checkpoint_location(model_cfg, revision: Revision, toy_dir: Optional[str] = None,
                        progress: bool = True) -> tuple[str, Optional[str]]:
    """(what to pass to from_pretrained, the revision argument or None for folders)."""
    if model_cfg.revisions == "toy":
        from emergence.toy import ensure_trained

        folder = ensure_trained(model_cfg.recipe, Path(toy_dir), model_cfg.name, progress=progress)
        return str(folder / revision.name), None
    if model_cfg.path:
        folder = Path(model_cfg.path) / revision.name
        if not (folder / "config.json").exists():
            raise EmergenceError(f"local checkpoint folder {str(folder)!r} is missing (no config.json); "
                                 f"model.path={model_cfg.path!r} must hold one HF folder per revision")
        return str(folder), None
    if not model_cfg.repo:
        raise EmergenceError(f"model {model_cfg.name!r} names neither model.repo nor model.path")
    return model_cfg.repo, revision.name


def _offline_message(repo: str, revision: str, exc: Exception) -> str:
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
    why = "HF_HUB_OFFLINE is set" if offline else "the hub could not be reached"
    return (f"{repo} at revision {revision!r} is not in the local HF cache and {why} "
            f"({type(exc).__name__}). Download it where the hub is reachable with "
            f"`hf download {repo} --revision {revision}` (then copy the HF cache here), or set "
            f"model.path to a local folder holding <revision>/ model folders")


def load(model_cfg, revision: Revision, known: Sequence[Revision] = (), device: str = "auto",
         toy_dir: Optional[str] = None, progress: bool = True) -> LoadedModel:
    """Load ``model_cfg`` at ``revision`` with eager attention on the chosen device and dtype."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one progress bar per job is ours; weight loading is instant

    dev = choose_device(device)
    dtype = choose_dtype(model_cfg.family, model_cfg.dtype, dev)
    where, rev = checkpoint_location(model_cfg, revision, toy_dir, progress)
    kwargs = dict(attn_implementation="eager", dtype=dtype)
    if rev is not None:
        kwargs["revision"] = rev
    try:
        model = AutoModelForCausalLM.from_pretrained(where, **kwargs)
    except OSError as exc:
        text = str(exc)
        if rev is not None and ("not a valid git identifier" in text or "Revision Not Found" in text
                                or "revision" in text.lower() and "not found" in text.lower()):
            near = ", ".join(nearest(known, rev)) if known else "see `python -m emergence.revisions show`"
            raise EmergenceError(f"revision {rev!r} of {where} does not exist on the hub; nearest valid: {near}") from None
        if rev is not None:
            raise EmergenceError(_offline_message(where, rev, exc)) from None
        raise EmergenceError(f"cannot load the checkpoint folder {where!r}: {exc}") from None
    model.to(dev).eval()
    tokenizer = None  # a folder without tokenizer files (the toy suite): ids come from the config
    has_files = rev is not None or any((Path(where) / f).exists() for f in TOKENIZER_FILES)
    if has_files:
        try:
            tokenizer = AutoTokenizer.from_pretrained(where, **({"revision": rev} if rev else {}))
        except (OSError, ValueError, TypeError):
            tokenizer = None
    source = f"{where}@{rev}" if rev else where
    return LoadedModel(model, tokenizer, adapter_for(model), source, dev, dtype)


def evict(repo: str, revision: str) -> int:
    """Delete ``repo`` at ``revision`` from the HF cache; returns the bytes freed (0 if absent)."""
    from huggingface_hub import scan_cache_dir

    try:
        cache = scan_cache_dir()
    except Exception:  # no cache folder yet
        return 0
    hashes = [r.commit_hash for info in cache.repos if info.repo_id == repo
              for r in info.revisions if revision in r.refs or r.commit_hash == revision]
    if not hashes:
        return 0
    strategy = cache.delete_revisions(*hashes)
    strategy.execute()
    return int(strategy.expected_freed_size)
