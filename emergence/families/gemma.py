"""Gemma 1-3: HF model types ``gemma``, ``gemma2`` and ``gemma3_text`` (Gemma3ForCausalLM).

``head_dim`` is set in the config (``num_attention_heads x head_dim`` need not equal ``hidden_size``).
Gemma 2 caps its attention logits (``attn_logit_softcapping``), which SDPA cannot do: it is
loaded with eager attention and the screen's attention computes its rows and outputs with the
cap (emergence/screens/attention.py). Gemma 2 and 3 alternate sliding-window and global layers;
the mask the model passes carries the window. Query scaling is the model's own
(``query_pre_attn_scalar``), passed to the attention function.
"""

from emergence.families import Family

FAMILY = Family(
    name="gemma",
    model_types=("gemma", "gemma2", "gemma3_text"),
    description="Gemma, Gemma 2, Gemma 3 (text)",
)
