"""Force heads of a real transformers model to known attention patterns.

The eager attention function is swapped, inside a context manager, for one that
builds each head's weights from a named pattern and applies them to the real
values, so the model's own modules and the screen's hooks run unchanged.
"""

from __future__ import annotations

import contextlib
from typing import Dict, Tuple

import torch


def pattern_weights(name: str, T: int, sharpness: float = 1.0) -> torch.Tensor:
    """[T, T] attention rows for the synthetic probe layout [first] a1..an a1..an.

    ``sharpness`` < 1 mixes the pattern with uniform attention (1 - sharpness of it).
    """
    n = (T - 1) // 2
    uniform = torch.tril(torch.ones(T, T))
    uniform = uniform / uniform.sum(-1, keepdim=True)
    if name == "uniform":
        return uniform
    W = torch.zeros(T, T)
    for q in range(T):
        if name == "previous":
            W[q, max(q - 1, 0)] = 1
        elif name == "first":
            W[q, 0] = 1
        elif name == "self":
            W[q, q] = 1
        elif name in ("induction", "duplicate"):
            if q > n:
                i = q - n
                W[q, i + 1 if name == "induction" else i] = 1
            else:
                W[q] = uniform[q]
        else:
            raise ValueError(name)
    return sharpness * W + (1 - sharpness) * uniform


@contextlib.contextmanager
def forced_attention(patterns: Dict[Tuple[int, int], str], sharpness: float = 1.0):
    """Heads (layer, head) -> pattern name; every other head attends uniformly."""
    from transformers.modeling_utils import AttentionInterface

    def forced(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        B, H, T, _ = query.shape
        layer = module.layer_idx
        W = torch.stack([pattern_weights(patterns.get((layer, h), "uniform"), T, sharpness) for h in range(H)])
        W = W.to(query.dtype).to(query.device).expand(B, H, T, T).contiguous()
        if value.shape[1] != H:  # grouped K/V heads
            value = value.repeat_interleave(H // value.shape[1], dim=1)
        out = torch.matmul(W, value).transpose(1, 2).contiguous()
        return out, W

    mapping = AttentionInterface._global_mapping
    saved = mapping.get("eager")
    mapping["eager"] = forced
    try:
        yield
    finally:
        if saved is None:
            mapping.pop("eager", None)
        else:
            mapping["eager"] = saved
