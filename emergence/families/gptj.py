"""GPT-J: HF model type ``gptj`` (GPT-J-6B; also the layout of the ``codegen`` family's ancestor).

Partial rotary (``rotary_dim``), parallel attention and MLP, no attention biases.
"""

from emergence.families import Family

FAMILY = Family(
    name="gptj",
    model_types=("gptj",),
    layers="transformer.h",
    attention="attn",
    projection="attn.out_proj",
    description="GPT-J",
)
