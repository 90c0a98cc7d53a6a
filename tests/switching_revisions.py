"""A local folder of tiny checkpoints whose induction circuit switches on at a known revision.

Every revision folder holds the same tiny GPT-NeoX weights; from the switch revision on, its
``config.json`` carries ``switched_on: true``. :func:`install` swaps transformers' eager
attention for one that reads that flag from the attention module's config: a switched-on model
has a previous-token head (0, 0) and two induction heads (1, 1), (2, 2) on the synthetic probe
(tests/forced_attention.py patterns); every other head, and every head before the switch,
attends uniformly. So ``count.induction`` is 0 before the switch and 2 from it on.

``install`` runs in the test process, and in subprocesses and joblib workers through a
``sitecustomize.py`` that :func:`sitecustomize_dir` writes (put its folder on PYTHONPATH).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from forced_attention import pattern_weights

SWITCHED = {(0, 0): "previous", (1, 1): "induction", (2, 2): "induction"}


def build(folder: Path, n: int, switch_step: int, tokens_per_step: int = 1000) -> Path:
    """Revisions step1 .. step<n> (tokens = step x tokens_per_step); switched on from ``switch_step``."""
    from tiny_models import tiny_model

    folder = Path(folder)
    template = folder / "_template"
    tiny_model("gpt_neox", seed=0, vocab_size=128, max_positions=64).save_pretrained(template)
    revisions = []
    for step in range(1, n + 1):
        target = folder / f"step{step}"
        shutil.copytree(template, target)
        config = json.loads((target / "config.json").read_text())
        config["switched_on"] = step >= switch_step
        (target / "config.json").write_text(json.dumps(config))
        revisions.append({"name": f"step{step}", "step": step, "tokens": step * tokens_per_step})
    shutil.rmtree(template)
    (folder / "revisions.json").write_text(json.dumps({"revisions": revisions}))
    return folder


def install():
    """Swap in the switched attention; returns a function that restores transformers' own
    (tests must call it: the swap is process-wide)."""
    from transformers.modeling_utils import AttentionInterface

    def forced(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        B, H, T, _ = query.shape
        on = bool(getattr(module.config, "switched_on", False))
        patterns = SWITCHED if on else {}
        W = torch.stack([pattern_weights(patterns.get((module.layer_idx, h), "uniform"), T) for h in range(H)])
        W = W.to(query.dtype).expand(B, H, T, T).contiguous()
        out = torch.matmul(W, value).transpose(1, 2).contiguous()
        return out, W

    mapping = AttentionInterface._global_mapping
    saved = mapping.get("eager")

    def restore() -> None:
        if saved is None:
            mapping.pop("eager", None)
        else:
            mapping["eager"] = saved

    mapping["eager"] = forced
    return restore


def sitecustomize_dir(folder: Path) -> Path:
    """A folder with a ``sitecustomize.py`` that installs the switch in every new interpreter."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tests = Path(__file__).resolve().parent
    (folder / "sitecustomize.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tests)!r})\nimport switching_revisions\nswitching_revisions.install()\n")
    return folder
