"""Load a model at a revision: ``from_pretrained(repo or folder, revision=...)``, eager attention.

- Hub models: ``AutoModelForCausalLM.from_pretrained(repo, revision=name)``.
- Local checkpoint folders (``model.path``) and the toy suite: ``<folder>/<revision>/``.
- dtype ``auto``: float32 on the CPU; on an accelerator bfloat16 for OLMo/OLMoE and
  float32 for GPT-NeoX. float16 is refused for GPT-NeoX (Pythia was trained in fp16
  with large Q/K biases; its attention overflows there).
- ``cache.evict=true`` deletes a screened hub revision from the HF cache afterwards.
- :func:`fetch_revision` brings a revision's files onto the disk (the hub: only config,
  weights and tokenizer, by ``huggingface_hub.snapshot_download``, which resumes an
  interrupted download and shows progress; folders: a check); ``emergence.prefetch``
  runs it one revision ahead of the screen, and :func:`load` reads what it fetched.
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


def fetch_revision(model_cfg, revision: Revision, known: Sequence[Revision] = (),
                   toy_dir: Optional[str] = None, progress: bool = True) -> str:
    """Make ``revision`` of ``model_cfg`` available on local disk; returns its folder.

    Hub models: ``snapshot_download(repo, revision=..., allow_patterns=screen_patterns(...))``
    into the HF cache (resumes partial downloads; progress bars unless ``progress`` is False);
    errors become one-line :class:`EmergenceError` s (revision missing: nearest valid ones;
    offline or unreachable: what to do). Local folders and the toy suite: the folder, checked."""
    where, rev = checkpoint_location(model_cfg, revision, toy_dir, progress)
    if rev is None:
        return where
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.utils import (RepositoryNotFoundError, RevisionNotFoundError, disable_progress_bars,
                                       enable_progress_bars)

    (enable_progress_bars if progress else disable_progress_bars)()
    try:
        try:
            files = HfApi().list_repo_files(where, revision=rev)
        except (RevisionNotFoundError, RepositoryNotFoundError):
            raise
        except Exception:  # offline or unreachable: the cache decides below
            files = None
        return snapshot_download(where, revision=rev, allow_patterns=screen_patterns(files))
    except RevisionNotFoundError:
        near = ", ".join(nearest(known, rev)) if known else "see `python -m emergence.revisions show`"
        raise EmergenceError(f"revision {rev!r} of {where} does not exist on the hub; nearest valid: {near}") from None
    except RepositoryNotFoundError:
        raise EmergenceError(f"model repo {where!r} does not exist on the hub (or needs a token); "
                             f"check model.repo of {model_cfg.name!r}") from None
    except Exception as exc:  # noqa: BLE001  (LocalEntryNotFound, offline mode, connection errors)
        raise EmergenceError(_offline_message(where, rev, exc)) from None


def _offline_message(repo: str, revision: str, exc: Exception) -> str:
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
    why = "HF_HUB_OFFLINE is set" if offline else "the hub could not be reached"
    return (f"{repo} at revision {revision!r} is not in the local HF cache and {why} "
            f"({type(exc).__name__}). Download it where the hub is reachable with "
            f"`hf download {repo} --revision {revision}` (then copy the HF cache here), or set "
            f"model.path to a local folder holding <revision>/ model folders")


def load(model_cfg, revision: Revision, known: Sequence[Revision] = (), device: str = "auto",
         toy_dir: Optional[str] = None, progress: bool = True, folder: Optional[str] = None) -> LoadedModel:
    """Load ``model_cfg`` at ``revision`` with eager attention on the chosen device and dtype.

    ``folder``: what :func:`fetch_revision` returned for it (read from there, no hub call)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one progress bar per job is ours; weight loading is instant
    if progress:  # ... but a download running ahead (emergence.prefetch) keeps its own bars
        from huggingface_hub.utils import enable_progress_bars

        enable_progress_bars()

    dev = choose_device(device)
    dtype = choose_dtype(model_cfg.family, model_cfg.dtype, dev)
    if folder is not None:
        where, rev = folder, None
        named = f"{model_cfg.repo}@{revision.name}" if model_cfg.repo and not model_cfg.path else folder
    else:
        where, rev = checkpoint_location(model_cfg, revision, toy_dir, progress)
        named = f"{where}@{rev}" if rev else where
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
    return LoadedModel(model, tokenizer, adapter_for(model), named, dev, dtype)


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


# --- batch size from a memory budget ----------------------------------------------------------

#: Budget on the CPU (and MPS) when ``screen.memory_gb`` is null, in GiB.
CPU_DEFAULT_MEMORY_GB = 4.0
#: Share of the free CUDA memory (measured after the weights are loaded) a screen may use.
CUDA_FREE_FRACTION = 0.9
#: Rows of logits the induction-loss reducer computes at once (emergence/screens/continuous.py).
LOGIT_CHUNK = 1024


def _dtype_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def sequence_bytes(config, seq_len: int, dtype: torch.dtype) -> int:
    """Peak bytes one probe sequence adds to the streaming pass (one layer alive at a time):

    ``16 H T^2 + w T (8 d + 3 f)``: one layer's attention ``[H, T, T]`` held as about four
    float32 copies (the scores, the float32 softmax, the reducer's float32 view and one
    masked product), plus that layer's activations in the model dtype (``w`` bytes a
    number): the residual stream, Q, K, V and the attention output (about 8 d), and the
    MLP's hidden width f (``intermediate_size``, times the experts a token is routed to
    for a mixture of experts) for its input, activation and product (3 f)."""
    H = int(config.num_attention_heads)
    d = int(config.hidden_size)
    f = int(getattr(config, "intermediate_size", None) or 4 * d)
    f *= int(getattr(config, "num_experts_per_tok", None) or 1)
    T = int(seq_len)
    return 16 * H * T * T + _dtype_bytes(dtype) * T * (8 * d + 3 * f)


@dataclass
class BatchPlan:
    batch_size: int
    budget_bytes: int
    #: Where the budget came from: ``screen.memory_gb``, ``free CUDA memory`` or ``CPU default``.
    budget_source: str
    per_sequence_bytes: int
    #: The most sequences the budget allows (before ``corpus.batch_size`` caps it).
    fits: int
    cap: int

    def describe(self) -> str:
        return (f"{self.budget_bytes / 2**30:.2f} GiB ({self.budget_source}), "
                f"{self.per_sequence_bytes / 2**20:.2f} MiB/sequence -> {self.fits} fit, "
                f"corpus.batch_size {self.cap} -> batch {self.batch_size}")


def memory_budget(memory_gb: Optional[float], device: torch.device) -> tuple[int, str]:
    """(bytes, source): ``screen.memory_gb`` GiB when set; else on CUDA 90% of the free memory
    (after the weights are loaded), elsewhere :data:`CPU_DEFAULT_MEMORY_GB`."""
    if memory_gb is not None:
        return int(float(memory_gb) * 2**30), "screen.memory_gb"
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free * CUDA_FREE_FRACTION), "free CUDA memory"
    return int(CPU_DEFAULT_MEMORY_GB * 2**30), "CPU default"


def plan_batch_size(config, seq_len: int, dtype: torch.dtype, device: torch.device,
                    memory_gb: Optional[float], cap: int) -> BatchPlan:
    """Sequences per forward pass: as many as the budget holds, after the induction-loss
    logits (``LOGIT_CHUNK x vocab`` float32, twice) are set aside, at least 1 and at most
    ``cap`` (``corpus.batch_size`` is an upper bound)."""
    budget, source = memory_budget(memory_gb, device)
    per_seq = sequence_bytes(config, seq_len, dtype)
    fixed = 8 * LOGIT_CHUNK * int(getattr(config, "vocab_size", 0) or 0)
    fits = max(1, (budget - fixed) // per_seq)
    return BatchPlan(int(min(fits, cap)), budget, source, per_seq, int(fits), int(cap))
