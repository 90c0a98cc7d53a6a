"""OLMoE (mixture of experts): HF model type ``olmoe`` (OLMoE-1B-7B).

The experts sit in the MLP, so the attention side is the same as OLMo's.
"""

from emergence.families import Family


def toy_config(recipe, common):
    """The toy suite's OLMoE: QK-norm, ``n_experts`` experts, ``top_k`` per token, router loss."""
    from transformers import OlmoeConfig

    rope = {"rope_type": "default", "rope_theta": float(recipe.rope_theta)}
    return OlmoeConfig(num_experts=int(recipe.n_experts), num_experts_per_tok=int(recipe.top_k),
                       router_aux_loss_coef=float(recipe.router_aux_loss_coef), clip_qkv=recipe.clip_qkv,
                       rope_parameters=rope, attention_bias=bool(recipe.attention_bias), attention_dropout=0.0,
                       **common)


FAMILY = Family(
    name="olmoe",
    model_types=("olmoe",),
    toy_config=toy_config,
    description="OLMoE (mixture of experts)",
)
