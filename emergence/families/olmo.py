"""OLMo (dense): HF model types ``olmo`` (OLMo-1B-0724) and ``olmo2`` (OLMo 2).

``auto`` is bfloat16 on a GPU, the dtype the models were trained in.
"""

from emergence.families import Family


def toy_config(recipe, common):
    """The toy suite's OLMo: non-parametric LayerNorm, SwiGLU, optional ``clip_qkv``."""
    from transformers import OlmoConfig

    rope = {"rope_type": "default", "rope_theta": float(recipe.rope_theta)}
    return OlmoConfig(rope_parameters=rope, clip_qkv=recipe.clip_qkv, attention_bias=bool(recipe.attention_bias),
                      attention_dropout=0.0, **common)


FAMILY = Family(
    name="olmo",
    model_types=("olmo", "olmo2"),
    toy_config=toy_config,
    description="OLMo, OLMo 2 (dense)",
)
