"""Load a model at a revision: ``from_pretrained(repo or folder, revision=...)``, SDPA attention,
straight onto the device (``device_map``, with accelerate), in the family's dtype
(emergence/families/, ``Family.dtype_name``), and size a screen's batches from a memory budget.

Where a revision lies is its model source's answer (emergence/sources/); the source's ``fetch``
puts it on disk (``emergence.prefetch`` runs it one revision ahead) and :func:`load` reads what it
fetched. ``cache.evict=true`` deletes a screened hub revision afterwards (:func:`evict`).
"""

from __future__ import annotations

import contextlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Tuple

import torch

from emergence import EmergenceError
from emergence import families
from emergence.common.checks import first_line
from emergence.config import DEVICE_HINT, MATMUL_PRECISIONS
from emergence.adapters import ArchitectureAdapter, adapter_for, config_problem
from emergence.revisions import Revision
from emergence.sources import source_for
from emergence.sources._hub import (HubUnreachable, evict, missing_revision_message,  # noqa: F401 (re-exported)
                                    offline_message, screen_patterns)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: The attention implementation a model is loaded with.
LOAD_ATTENTION = "sdpa"


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: Optional[object]
    adapter: ArchitectureAdapter
    source: str  # repo@revision or folder
    device: torch.device
    dtype: torch.dtype
    #: The matmul precision of its passes: ``tf32`` or ``float32`` (:func:`choose_matmul_precision`).
    matmul_precision: str = "float32"


def choose_device(name: str = "auto") -> torch.device:
    mps = bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "mps" if mps else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise EmergenceError(f"unknown device {name!r}; valid: {DEVICE_HINT}") from None
    here = ["auto", "cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())] + (["mps"] if mps else [])
    if (device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count())
            or device.type == "mps" and not mps):
        raise EmergenceError(f"device={name} is not available on this machine; valid here: {', '.join(here)}")
    return device


def choose_dtype(family: str, requested: str, device: torch.device) -> torch.dtype:
    """The dtype to load a model of ``family`` in: the family's policy (``Family.dtype_name``);
    for ``auto`` not yet resolved (a dry run that cannot read the config), a family's default."""
    chosen = families.Family("auto", (), "", "", "") if family == families.AUTO else families.get(family)
    return DTYPES[chosen.dtype_name(requested, device.type)]


def choose_matmul_precision(family: str, requested: str, device: torch.device, dtype: torch.dtype) -> str:
    """``tf32`` or ``float32``: how the passes' float32 matrix products run.

    TF32 exists for float32 products on CUDA only, so everywhere else (CPU, MPS, a bfloat16
    or float16 model) the answer is ``float32`` (nothing changes). On CUDA with a float32
    model: ``auto`` is ``tf32`` where the family allows it (``Family.tf32``), else
    ``float32``; ``tf32`` and ``float32`` are used as given."""
    if requested not in MATMUL_PRECISIONS:
        raise EmergenceError(f"unknown matmul_precision {requested!r}; valid: {', '.join(MATMUL_PRECISIONS)}")
    if device.type != "cuda" or dtype != torch.float32:
        return "float32"
    if requested == "auto":
        return "tf32" if family == families.AUTO or families.get(family).tf32 else "float32"
    return requested


@contextlib.contextmanager
def matmul_precision(name: str):
    """Within the block, CUDA float32 matrix products run in TF32 (``tf32``) or IEEE float32
    (``float32``), through torch's ``torch.backends.cuda.matmul.fp32_precision``, restored
    afterwards. ``float32`` changes the setting only inside a ``tf32`` block (the screen's
    reducers run their sums so within a TF32 pass: emergence/screens/base.py); elsewhere it
    leaves torch's default (IEEE float32) as it is."""
    settings = torch.backends.cuda.matmul
    saved = settings.fp32_precision
    wanted = "tf32" if name == "tf32" else ("ieee" if saved == "tf32" else saved)
    if wanted == saved:
        yield
        return
    settings.fp32_precision = wanted
    try:
        yield
    finally:
        settings.fp32_precision = saved


def load(model_cfg, revision: Revision, known: Sequence[Revision] = (), device: str = "auto",
         toy_dir: Optional[str] = None, progress: bool = True, folder: Optional[str] = None,
         precision: str = "auto", source=None) -> LoadedModel:
    """Load ``model_cfg`` at ``revision`` with SDPA attention, straight onto the chosen device, in
    the family's dtype; ``precision``: the ``matmul_precision`` setting (:func:`choose_matmul_precision`).

    ``folder``: what the source's ``fetch`` returned for it (read from there, no hub call);
    without it, the source's ``locate`` says where the revision is (the toy suite is trained
    there on first use). ``source``: the model's source where the caller has it (a job's plan)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one progress bar per job is ours; weight loading is instant
    if progress:  # ... but a download running ahead (emergence.prefetch) keeps its own bars
        from huggingface_hub.utils import enable_progress_bars

        enable_progress_bars()

    dev = choose_device(device)
    source = source_for(model_cfg) if source is None else source
    if folder is not None:
        where, rev = folder, None
    else:
        located = source.locate(model_cfg, revision, toy_dir, progress)
        where, rev = located.where, located.revision
    named = source.label(model_cfg, revision, where)
    kwargs = {}  # the weights read straight onto the device (accelerate's device_map), else loaded, then moved
    if importlib.util.find_spec("accelerate") is not None:
        kwargs["device_map"] = str(dev) if dev.index is not None or dev.type != "cuda" else "cuda:0"
    if rev is not None:
        kwargs["revision"] = rev
    family, model = _from_pretrained(model_cfg, where, rev, named, known, kwargs, dev)
    model.to(dev).eval()
    tokenizer = _tokenizer(where, rev, named)
    dtype = kwargs["dtype"]
    return LoadedModel(model, tokenizer, adapter_for(model, family), named, dev, dtype,
                       choose_matmul_precision(family, precision, dev, dtype))


def _from_pretrained(model_cfg, where: str, rev: Optional[str], named: str, known: Sequence[Revision],
                     kwargs: dict, dev: torch.device):
    """(family, model) of the checkpoint at ``where`` (``rev``), with ``kwargs`` completed by its
    attention implementation and dtype. A missing revision, an unreachable hub, an unreadable folder
    and corrupt weights each raise one line."""
    from transformers import AutoModelForCausalLM

    try:
        family, kwargs["attn_implementation"] = checkpoint_family(model_cfg.family, where, rev, named)
        kwargs["dtype"] = choose_dtype(family, model_cfg.dtype, dev)
        return family, AutoModelForCausalLM.from_pretrained(where, **kwargs)
    except EmergenceError:
        raise
    except OSError as exc:
        text = str(exc)
        if rev is not None and ("not a valid git identifier" in text or "Revision Not Found" in text
                                or "revision" in text.lower() and "not found" in text.lower()):
            raise EmergenceError(missing_revision_message(where, rev, known)) from None
        if rev is not None:
            raise HubUnreachable(offline_message(where, rev, exc)) from None
        raise EmergenceError(f"cannot load the checkpoint folder {where!r}: {exc}") from None
    except Exception as exc:  # a truncated or corrupt weights file (safetensors' own error types)
        bad = unreadable_weights(where) if rev is None else []
        if not bad and "safetensor" not in type(exc).__name__.lower():
            raise
        what = str(bad[0]) if bad else f"a weights file of {named}"
        cause = first_line(str(exc), type(exc).__name__)  # (a weights reader's error may have no message)
        raise EmergenceError(f"{what} is truncated or corrupt ({cause}); delete it and "
                             "download it again (a toy checkpoint: delete its folder, it is retrained)") from None


def _tokenizer(where: str, rev: Optional[str], named: str):
    """The checkpoint's tokenizer; None for a folder without tokenizer files (the toy suite: ids come
    from the config). Incomplete files raise: never screen without it (the probe would use padded rows)."""
    from transformers import AutoTokenizer

    if rev is None and not any((Path(where) / f).exists() for f in TOKENIZER_FILES):
        return None
    try:
        return AutoTokenizer.from_pretrained(where, **({"revision": rev} if rev else {}))
    except Exception as exc:  # noqa: BLE001
        raise EmergenceError(f"cannot load the tokenizer of {named} ({type(exc).__name__}: "
                             f"{first_line(str(exc))}); its files are incomplete or "
                             "corrupt: delete them and download them again") from None


def checkpoint_family(requested: str, where: str, rev: Optional[str], named: str) -> Tuple[str, str]:
    """(family, attention implementation) of the checkpoint at ``where`` (``rev``), from its config
    alone, before any weights: the family ``model.family=requested`` resolves to
    (:func:`emergence.families.choose`), and ``sdpa`` where its model class has an SDPA path, else
    ``eager`` (BLOOM, Gemma 2's capped logits)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(where, **({"revision": rev} if rev else {}))
    family = families.choose(str(requested), config.model_type, named, lambda: config_problem(config))
    try:
        model_class = AutoModelForCausalLM._model_mapping[type(config)]
    except (KeyError, ValueError):
        return family.name, LOAD_ATTENTION
    return family.name, LOAD_ATTENTION if getattr(model_class, "_supports_sdpa", False) else "eager"


def unreadable_weights(folder) -> list:
    """The ``*.safetensors`` files of a folder that safetensors cannot open (truncated, corrupt)."""
    from safetensors import safe_open

    bad = []
    for path in sorted(Path(folder).glob("*.safetensors")) if Path(str(folder)).is_dir() else []:
        try:
            with safe_open(str(path), framework="pt"):
                pass
        except Exception:  # noqa: BLE001  (safetensors raises its own error types)
            bad.append(path)
    return bad


# --- batch size from a memory budget ----------------------------------------------------------

#: Budget on the CPU (and MPS) when ``screen.memory_gb`` is null, in GiB.
CPU_DEFAULT_MEMORY_GB = 4.0
#: Share of the free CUDA memory (measured after the weights are loaded) a screen may use.
CUDA_FREE_FRACTION = 0.9
#: Rows of logits the induction-loss reducer computes at once (emergence/screens/continuous.py).
LOGIT_CHUNK = 1024


def sequence_bytes(config, seq_len: int, dtype: torch.dtype, rows: Optional[int] = None) -> int:
    """Peak bytes one probe sequence adds to the streaming pass (one layer alive at a time):

    ``16 H T R + w T (9 d + 3 f)``: the attention rows the reducers read, ``[H, R, T]`` (R = T
    for the full map, ``rows`` otherwise: 1 for the xu2026 recipe's last query, 0 for a pass
    that reads none; SDPA computes each layer's output without a ``[T, T]`` map), held as
    about four float32 copies (the scores, the float32 softmax, the reducer's view and one
    masked product), plus that layer's activations in the model dtype (``w`` bytes a
    number): the residual stream, Q, K, V and the attention output (about 8 d), the clean
    residual state an ablation pass keeps (d: emergence/screens/prefix.py), and the MLP's
    hidden width f (``intermediate_size``, times the experts a token is routed to for a
    mixture of experts) for its input, activation and product (3 f)."""
    H = int(config.num_attention_heads)
    d = int(config.hidden_size)
    f = int(getattr(config, "intermediate_size", None) or 4 * d)
    f *= int(getattr(config, "num_experts_per_tok", None) or 1)
    T = int(seq_len)
    R = T if rows is None else int(rows)
    return 16 * H * T * R + torch.empty((), dtype=dtype).element_size() * T * (9 * d + 3 * f)


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


def memory_budget(memory_gb: Optional[float], device: torch.device, reserve_bytes: int = 0) -> tuple[int, str]:
    """(bytes, source): ``screen.memory_gb`` GiB when set; else on CUDA 90% of the free memory
    (after the weights are loaded) less ``reserve_bytes`` (a model being loaded ahead,
    emergence/prefetch.py), elsewhere :data:`CPU_DEFAULT_MEMORY_GB`."""
    if memory_gb is not None:
        return int(float(memory_gb) * 2**30), "screen.memory_gb"
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        source = "free CUDA memory" + (" less the model loading ahead" if reserve_bytes else "")
        return max(int(free * CUDA_FREE_FRACTION) - int(reserve_bytes), 0), source
    return int(CPU_DEFAULT_MEMORY_GB * 2**30), "CPU default"


def plan_batch_size(config, seq_len: int, dtype: torch.dtype, device: torch.device,
                    memory_gb: Optional[float], cap: int, rows: Optional[int] = None,
                    reserve_bytes: int = 0) -> BatchPlan:
    """Sequences per forward pass: as many as the budget holds, after the induction-loss
    logits (``LOGIT_CHUNK x vocab`` float32, twice) are set aside, at least 1 and at most
    ``cap`` (``corpus.batch_size`` is an upper bound); ``rows``: the attention rows a query
    of the screen reads (None: the full map; :meth:`emergence.screens.recipes.ScreenRecipe.attention_rows`);
    ``reserve_bytes``: memory a model loading ahead will take (the default CUDA budget only)."""
    budget, source = memory_budget(memory_gb, device, reserve_bytes)
    per_seq = sequence_bytes(config, seq_len, dtype, rows)
    fixed = 8 * LOGIT_CHUNK * int(getattr(config, "vocab_size", 0) or 0)
    fits = max(1, (budget - fixed) // per_seq)
    return BatchPlan(int(min(fits, cap)), budget, source, per_seq, int(fits), int(cap))


def model_bytes(model: torch.nn.Module) -> int:
    """The bytes of a model's parameters and buffers (what loading the next revision adds)."""
    return sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))
