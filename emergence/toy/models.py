"""Toy models, built from transformers' own config classes.

Each family of the registry (emergence/families/) that has a toy builder
(``Family.toy_config``, whose docstring says what its toy is) can be trained; today
``gpt_neox`` (dense, like Pythia), ``olmo`` (dense, like OLMo-1B) and ``olmoe`` (mixture
of experts, like OLMoE-1B-7B).

``bos_token_id = eos_token_id = recipe.corpus.first_token``, no pad token, vocabulary
``recipe.corpus.vocab_size``, untied embeddings, no dropout. The saved config is a
plain HF config: it does not force an attention implementation (the loader asks
for eager; training uses SDPA).
"""

from __future__ import annotations

import torch

from emergence import EmergenceError
from emergence import families
from emergence.toy.recipe import init_seed


def toy_families() -> tuple:
    """Names of the registered families with a toy builder (the ones the suite can train)."""
    return tuple(name for name, f in families.families().items() if f.toy_config is not None)


def check_recipe(recipe) -> None:
    """Reject recipes that cannot be built or trained; the message names the key."""
    if recipe.family not in toy_families():
        raise EmergenceError(f"recipe.family={recipe.family!r} is unknown; valid: {', '.join(toy_families())}")
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
    """The HF config of ``recipe``'s model: the family's toy builder, given the keyword
    arguments every family shares."""
    check_recipe(recipe)
    first = int(recipe.corpus.first_token)
    common = dict(
        vocab_size=int(recipe.corpus.vocab_size), hidden_size=int(recipe.d_model),
        num_hidden_layers=int(recipe.n_layers), num_attention_heads=int(recipe.n_heads),
        intermediate_size=int(recipe.d_ff), max_position_embeddings=int(recipe.seq_len),
        initializer_range=float(recipe.init_std), bos_token_id=first, eos_token_id=first,
        pad_token_id=None, tie_word_embeddings=False, use_cache=False,
    )
    return families.get(recipe.family).toy_config(recipe, common)


def build_model(recipe, attn_implementation: str = "sdpa"):
    """A freshly initialised model (float32), seeded by the recipe's init seed (``init_seed``, else ``seed``)."""
    from transformers import AutoModelForCausalLM

    config = build_config(recipe)
    torch.manual_seed(init_seed(recipe))
    return AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation, dtype=torch.float32)
