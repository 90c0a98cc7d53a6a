"""Toy models of the three families, built from transformers' own config classes.

- ``gpt_neox``: ``GPTNeoXConfig`` (dense, like Pythia: parallel residual, biases,
  LayerNorm), full rotary (``rotary_pct=1.0``).
- ``olmo``: ``OlmoConfig`` (dense, like OLMo-1B: non-parametric LayerNorm, SwiGLU,
  optional ``clip_qkv``).
- ``olmoe``: ``OlmoeConfig`` (mixture of experts, like OLMoE-1B-7B: QK-norm over the
  full width, ``n_experts`` experts, ``top_k`` per token, router load-balancing loss).

``bos_token_id = eos_token_id = recipe.corpus.first_token``, no pad token, vocabulary
``recipe.corpus.vocab_size``, untied embeddings, no dropout. The saved config is a
plain HF config: it does not force an attention implementation (the loader asks
for eager; training uses SDPA).
"""

from __future__ import annotations

import torch

from emergence import EmergenceError

FAMILIES = ("gpt_neox", "olmo", "olmoe")


def check_recipe(recipe) -> None:
    """Reject recipes that cannot be built or trained; the message names the key."""
    if recipe.family not in FAMILIES:
        raise EmergenceError(f"recipe.family={recipe.family!r} is unknown; valid: {', '.join(FAMILIES)}")
    for key in ("n_layers", "n_heads", "d_model", "d_ff", "seq_len", "batch_size", "steps"):
        if int(getattr(recipe, key)) < 1:
            raise EmergenceError(f"recipe.{key}={getattr(recipe, key)} must be >= 1")
    if recipe.d_model % recipe.n_heads:
        raise EmergenceError(f"recipe.d_model={recipe.d_model} is not divisible by recipe.n_heads={recipe.n_heads}")
    if (recipe.d_model // recipe.n_heads) % 2:
        raise EmergenceError(f"recipe.d_model / n_heads = {recipe.d_model // recipe.n_heads} must be even (rotary)")
    if recipe.family == "olmoe" and not 1 <= recipe.top_k <= recipe.n_experts:
        raise EmergenceError(f"recipe.top_k={recipe.top_k} must lie in [1, n_experts={recipe.n_experts}]")
    if recipe.lr <= 0:
        raise EmergenceError(f"recipe.lr={recipe.lr} must be > 0")
    if not 1 <= recipe.first_checkpoint <= recipe.steps:
        raise EmergenceError(f"recipe.first_checkpoint={recipe.first_checkpoint} must lie in "
                             f"[1, steps={recipe.steps}]")
    if recipe.n_checkpoints < 1:
        raise EmergenceError(f"recipe.n_checkpoints={recipe.n_checkpoints} must be >= 1")


def build_config(recipe):
    """The HF config of ``recipe``'s model."""
    from transformers import GPTNeoXConfig, OlmoConfig, OlmoeConfig

    check_recipe(recipe)
    first = int(recipe.corpus.first_token)
    common = dict(
        vocab_size=int(recipe.corpus.vocab_size), hidden_size=int(recipe.d_model),
        num_hidden_layers=int(recipe.n_layers), num_attention_heads=int(recipe.n_heads),
        intermediate_size=int(recipe.d_ff), max_position_embeddings=int(recipe.seq_len),
        initializer_range=float(recipe.init_std), bos_token_id=first, eos_token_id=first,
        pad_token_id=None, tie_word_embeddings=False, use_cache=False,
    )
    rope = {"rope_type": "default", "rope_theta": float(recipe.rope_theta)}
    if recipe.family == "gpt_neox":
        return GPTNeoXConfig(rope_parameters={**rope, "partial_rotary_factor": 1.0}, use_parallel_residual=True,
                             hidden_dropout=0.0, attention_dropout=0.0, attention_bias=True, **common)
    if recipe.family == "olmo":
        return OlmoConfig(rope_parameters=rope, clip_qkv=recipe.clip_qkv, attention_bias=bool(recipe.attention_bias),
                          attention_dropout=0.0, **common)
    return OlmoeConfig(num_experts=int(recipe.n_experts), num_experts_per_tok=int(recipe.top_k),
                       router_aux_loss_coef=float(recipe.router_aux_loss_coef), clip_qkv=recipe.clip_qkv,
                       rope_parameters=rope, attention_bias=bool(recipe.attention_bias), attention_dropout=0.0,
                       **common)


def build_model(recipe, attn_implementation: str = "sdpa"):
    """A freshly initialised model (float32), seeded by ``recipe.seed``."""
    from transformers import AutoModelForCausalLM

    config = build_config(recipe)
    torch.manual_seed(int(recipe.seed))
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation,
                                             dtype=torch.float32)
    return model
