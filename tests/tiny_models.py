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
