r"""The screen's attention: SDPA for every layer's output, the map only where a reducer reads it.

A pass switches the model (:func:`screen_attention`) to the attention implementation
``emergence_screen``, registered in transformers' ``AttentionInterface`` (with SDPA's mask
function in ``AttentionMaskInterface``). For every layer it computes

- the layer's output with transformers' SDPA path (``sdpa_attention_forward``: the fused
  ``scaled_dot_product_attention``, the same function a model loaded with
  ``attn_implementation="sdpa"`` runs), so a pass that reads no rows, or a few, never
  materialises a ``[T, T]`` map; when a reducer reads every row (the project recipe) the
  map is computed anyway, and the output is then ``A V`` from it, as eager attention
  computes it (one attention computation, not two);
- for the attention modules given a *tap* (the pass's rows), the attention weights of
  the requested query rows R only, recomputed from the same Q and K as eager attention
  computes them:

  .. math::

      A[b, h, r, k] = \operatorname{softmax}_k\big(Q[b, h, r] \cdot K[b, g(h), k] \cdot s
      + m[b, r, k]\big), \qquad r \in R,

  with s the module's scaling, g(h) the key/value head of query head h (grouped-query
  attention repeats K), m the mask (causal: 0 for k <= r, -inf after; the model's own
  mask where it passes one, e.g. a sliding window), the product in the model dtype and
  the softmax in float32 (eager's order; the rows are kept in float32). They come back as
  the attention module's second output ``[B, H, |R|, T]``, where the pass's forward hook
  reads them. ``R = None`` means every row (the full map, for the project recipe's
  reducers); ``R = ()`` none (the ablation passes, which read no attention).

An attention function registered under ``eager`` in transformers' ``AttentionInterface``
(an intervention that rewrites the attention itself, as the tests' forced patterns do)
replaces both: it computes the output and the map (given eager's additive mask), and the
rows are read from its map, so every pass of a screen sees the same intervention.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import Iterable, Optional, Sequence, Tuple

import torch

from emergence import EmergenceError

#: The implementation name a pass switches a model to.
SCREEN_ATTENTION = "emergence_screen"
#: Query rows: None = every row, () = none, else positions (negative ones count from the end).
Rows = Optional[Tuple[int, ...]]

_TAPS: "weakref.WeakKeyDictionary[torch.nn.Module, Tuple[int, ...] | None]" = weakref.WeakKeyDictionary()


def merge_rows(requests: Iterable[Rows], seq_len: int) -> Rows:
    """The rows a pass computes for reducers asking ``requests``: None if any asks every row,
    else the sorted union of their positions (as non-negative positions); () for no request."""
    out = set()
    for rows in requests:
        if rows is None:
            return None
        out.update(r % seq_len for r in rows)
    return tuple(sorted(out))


def _row_index(rows: Tuple[int, ...], T: int, device) -> torch.Tensor:
    return torch.tensor([r % T for r in rows], dtype=torch.long, device=device)


def _pick(weights: Optional[torch.Tensor], rows: Rows) -> Optional[torch.Tensor]:
    """The query ``rows`` of attention weights ``[B, H, T, T]`` (None for no rows or no weights)."""
    if rows == () or weights is None:
        return None
    return weights if rows is None else weights.index_select(2, _row_index(rows, weights.shape[2], weights.device))


def _causal_bias(rows: Rows, T_q: int, T_k: int, dtype, device) -> torch.Tensor:
    """Eager's additive causal mask for the query ``rows``: [|R|, T_k], 0 where k <= r, min after."""
    key = (rows, T_q, T_k, dtype, device)
    if key not in _BIASES:
        positions = torch.arange(T_q, device=device) + (T_k - T_q)
        q_pos = positions if rows is None else positions.index_select(0, _row_index(rows, T_q, device))
        allowed = torch.arange(T_k, device=device)[None, :] <= q_pos[:, None]
        _BIASES.clear() if len(_BIASES) > 16 else None
        _BIASES[key] = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed,
                                                                                          torch.finfo(dtype).min)
    return _BIASES[key]


_BIASES: dict = {}


def attention_rows(query: torch.Tensor, key: torch.Tensor, attention_mask: Optional[torch.Tensor],
                   scaling: Optional[float], rows: Rows, softcap: Optional[float] = None) -> torch.Tensor:
    """Eager attention weights of the query ``rows`` (float32 ``[B, H, |R|, T_k]``; see the module
    docstring). ``attention_mask``: None (causal), boolean (True = attend) or additive;
    ``softcap``: logits capped as ``softcap * tanh(s / softcap)`` before the mask (Gemma 2)."""
    B, H, T_q, D = query.shape
    T_k = key.shape[-2]
    scaling = D ** -0.5 if scaling is None else scaling
    index = None if rows is None else _row_index(rows, T_q, query.device)
    q = query if index is None else query.index_select(2, index)
    if key.shape[1] != H:  # grouped-query attention: each K/V head serves H / H_kv query heads
        key = key.repeat_interleave(H // key.shape[1], dim=1)
    R = q.shape[2]
    if attention_mask is None and index is None and not softcap:  # the full map: mask and scaling fused
        bias = _causal_bias(rows, T_q, T_k, q.dtype, q.device).expand(B * H, R, T_k)
        scores = torch.baddbmm(bias, q.reshape(B * H, R, D), key.reshape(B * H, T_k, D).transpose(1, 2),
                               alpha=scaling).view(B, H, R, T_k)
    elif attention_mask is None and not softcap:  # a few rows: a strided product, K not copied
        scores = torch.matmul(q, key.transpose(2, 3)) * scaling + _causal_bias(rows, T_q, T_k, q.dtype, q.device)
    else:  # the model's mask, or capped logits: eager's additive mask, of the rows only
        scores = torch.matmul(q, key.transpose(2, 3))
        scores = torch.tanh(scores * (scaling / softcap)) * softcap if softcap else scores * scaling
        if attention_mask is None:
            mask = _causal_bias(rows, T_q, T_k, q.dtype, q.device)
        else:  # the rows picked before a boolean mask is converted (not the whole [B, 1, T, T])
            mask = attention_mask[..., :T_k]
            mask = _eager_mask(mask if index is None else mask.index_select(-2, index), query, key)
        scores = scores + mask
    return torch.softmax(scores, dim=-1, dtype=torch.float32)


def _eager_mask(attention_mask: Optional[torch.Tensor], query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Eager attention's additive mask (0 where attended, the dtype's min elsewhere)."""
    if attention_mask is None:
        return _causal_bias(None, query.shape[-2], key.shape[-2], query.dtype, query.device)[None, None]
    if attention_mask.dtype != torch.bool:
        return attention_mask
    zero = torch.zeros((), dtype=query.dtype, device=query.device)
    return torch.where(attention_mask, zero, torch.full((), torch.finfo(query.dtype).min, dtype=query.dtype,
                                                          device=query.device))


def screen_attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0,
                             scaling: Optional[float] = None, **kwargs):
    """The ``emergence_screen`` attention function (see the module docstring)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.modeling_utils import AttentionInterface

    rows = _TAPS.get(module, ())
    override = AttentionInterface._global_mapping.get("eager")
    if override is not None:
        out, weights = override(module, query, key, value, _eager_mask(attention_mask, query, key), dropout=dropout,
                                scaling=scaling, **kwargs)
        return out, _pick(weights, rows)
    softcap = kwargs.get("softcap")
    if rows is None or softcap:  # the full map is computed anyway (SDPA cannot cap logits): the output from it
        weights = attention_rows(query, key, attention_mask, scaling, None, softcap)
        if value.shape[1] != query.shape[1]:
            value = value.repeat_interleave(query.shape[1] // value.shape[1], dim=1)
        out = torch.matmul(weights.to(value.dtype), value).transpose(1, 2).contiguous()
        return out, _pick(weights, rows)
    out, _ = sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                    **kwargs)
    if rows == ():
        return out, None
    return out, attention_rows(query, key, attention_mask, scaling, rows)


@functools.cache
def register() -> None:
    """Register ``emergence_screen`` with transformers (once a process)."""
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(SCREEN_ATTENTION, screen_attention_forward)
    AttentionMaskInterface.register(SCREEN_ATTENTION, sdpa_mask)


def uses_interface(model: torch.nn.Module) -> bool:
    """True when ``model``'s attention goes through transformers' attention interface (so the
    screen can switch it); False for a model whose attention modules compute eager attention
    themselves and return the probabilities (BLOOM: :func:`eager_taps`)."""
    return bool(getattr(model, "_supports_attention_backend", False))


@contextlib.contextmanager
def eager_taps(modules: Sequence[torch.nn.Module], rows: Rows):
    """For a model without the attention interface (BLOOM): each of ``modules`` computes eager
    attention and returns its probabilities ``[B, H, T, T]`` second; within the block that
    output becomes the rows ``rows`` in float32 (None when ``rows`` is ``()``), before any other
    hook reads it."""
    def tap(_module, _args, output):
        picked = _pick(output[1], rows)
        return (output[0], None if picked is None else picked.float()) + tuple(output[2:])

    handles = [m.register_forward_hook(tap, prepend=True) for m in modules]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def screen_attention(model: torch.nn.Module, modules: Sequence[torch.nn.Module] = (), rows: Rows = ()):
    """Within the block, ``model`` attends with ``emergence_screen`` and each of ``modules``
    returns the attention weights of ``rows`` as its second output; the model's own
    implementation is restored afterwards. A model without the attention interface keeps its
    own (eager) attention and its modules' weights are cut to ``rows`` (:func:`eager_taps`)."""
    if not uses_interface(model):
        with eager_taps(modules, rows):
            yield
        return
    register()
    saved = model.config._attn_implementation
    if saved != SCREEN_ATTENTION:
        model.set_attn_implementation(SCREEN_ATTENTION)
        if model.config._attn_implementation != SCREEN_ATTENTION:
            raise EmergenceError(f"{type(model).__name__} cannot switch its attention implementation (it does not use "
                                 "transformers' AttentionInterface), so the screen cannot read its attention")
    previous = {m: _TAPS[m] for m in modules if m in _TAPS}
    for m in modules:
        _TAPS[m] = rows
    try:
        yield
    finally:
        for m in modules:
            _TAPS.pop(m, None)
        _TAPS.update(previous)
        if saved != SCREEN_ATTENTION:
            model.set_attn_implementation(saved or "sdpa")
