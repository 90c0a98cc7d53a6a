"""Tiny real transformers models of the three families, built locally (no hub)."""

from __future__ import annotations

from pathlib import Path

import torch

FAMILIES = ("gpt_neox", "olmo", "olmoe")
VOCAB = 96


def tiny_config(family: str, n_layers: int = 4, n_heads: int = 4, d_model: int = 32, vocab_size: int = VOCAB,
                max_positions: int = 128):
    from transformers import GPTNeoXConfig, OlmoConfig, OlmoeConfig

    common = dict(vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layers,
                  num_attention_heads=n_heads, intermediate_size=2 * d_model, bos_token_id=0,
                  eos_token_id=0, max_position_embeddings=max_positions, tie_word_embeddings=False)
    if family == "gpt_neox":
        return GPTNeoXConfig(rotary_pct=1.0, **common)
    if family == "olmo":
        return OlmoConfig(pad_token_id=None, **common)
    return OlmoeConfig(num_experts=4, num_experts_per_tok=2, pad_token_id=None, **common)


def tiny_model(family: str, seed: int = 0, **kw):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(family, **kw), attn_implementation="eager")
    return model.eval()


def save_revisions(folder: Path, family: str, steps=(0, 10, 100), tokens_per_step: int = 1000, **kw):
    """A local checkpoint folder: one HF model folder per revision and revisions.json
    (``kw``: tiny_config's, e.g. ``vocab_size=128, max_positions=64``)."""
    import json

    revisions = []
    for i, step in enumerate(steps):
        model = tiny_model(family, seed=i, **kw)
        model.save_pretrained(folder / f"step{step}")
        revisions.append({"name": f"step{step}", "step": step, "tokens": step * tokens_per_step})
    (folder / "revisions.json").write_text(json.dumps({"revisions": revisions}))
    return folder


# --- one tiny decoder of each further family (and of two types only the generic family screens) ----

#: HF model type -> the family ``model.family: auto`` picks for it.
DECODERS = {"gpt2": "gpt2", "qwen3": "qwen3", "gemma": "gemma", "gemma2": "gemma", "gemma3_text": "gemma",
            "phi": "phi", "phi3": "phi", "gptj": "gptj", "bloom": "bloom",
            "starcoder2": "generic", "granite": "generic"}


def decoder_config(model_type: str, vocab_size: int = VOCAB):
    """A tiny config of ``model_type``: 2 layers, 4 heads (2 key/value heads where it has them)."""
    from transformers import AutoConfig

    size = dict(vocab_size=vocab_size, bos_token_id=0, eos_token_id=0, pad_token_id=None, tie_word_embeddings=False)
    if model_type == "gpt2":
        return AutoConfig.for_model("gpt2", n_embd=32, n_layer=2, n_head=4, n_positions=128, **size)
    if model_type == "gptj":
        return AutoConfig.for_model("gptj", n_embd=32, n_layer=2, n_head=4, n_positions=128, rotary_dim=4, **size)
    if model_type == "bloom":
        return AutoConfig.for_model("bloom", hidden_size=32, n_layer=2, n_head=4, **size)
    extra = {"phi": dict(partial_rotary_factor=0.5), "gemma2": dict(attn_logit_softcapping=5.0, sliding_window=8),
             "gemma3_text": dict(sliding_window=8), "qwen3": dict(head_dim=8)}.get(model_type, {})
    if model_type.startswith("gemma"):
        extra = dict(extra, head_dim=8)
    return AutoConfig.for_model(model_type, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                                **size, **extra)


def save_decoder(folder: Path, model_type: str, steps=(0, 100), tokens_per_step: int = 1000):
    """Revision folders ``step<N>/`` of random tiny ``model_type`` decoders, with revisions.json."""
    import json

    from transformers import AutoModelForCausalLM

    revisions = []
    for i, step in enumerate(steps):
        torch.manual_seed(i)
        AutoModelForCausalLM.from_config(decoder_config(model_type)).save_pretrained(folder / f"step{step}")
        revisions.append({"name": f"step{step}", "step": step, "tokens": step * tokens_per_step})
    (folder / "revisions.json").write_text(json.dumps({"revisions": revisions}))
    return folder
