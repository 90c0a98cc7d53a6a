"""GPT-2: HF model type ``gpt2`` (OpenAI GPT-2, Stanford CRFM's Mistral GPT-2 runs).

Hooks: ``transformer.h[i].attn`` (its forward calls the attention interface and returns the
weights second) and ``transformer.h[i].attn.c_proj`` (a ``Conv1D`` whose input is the merged
per-head outputs). Learned absolute positions, biases, LayerNorm. ``auto`` is bfloat16 on a
GPU. (``reorder_and_upcast_attn``, which only GPT-2's eager path reads, is not emulated: the
screen's attention softmaxes in float32 anyway.)
"""

from emergence.families import Family

FAMILY = Family(
    name="gpt2",
    model_types=("gpt2",),
    layers="transformer.h",
    attention="attn",
    projection="attn.c_proj",
    description="GPT-2 (OpenAI, Stanford CRFM)",
)
