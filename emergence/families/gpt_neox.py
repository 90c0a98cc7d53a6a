"""GPT-NeoX (Pythia): parallel residual, biases, LayerNorm, rotary.

Pythia was trained in fp16 with large Q/K biases; its attention overflows in fp16, so
``auto`` stays float32 on a GPU too and float16 is refused. On CUDA its float32 matrix products
run in TF32 (``matmul_precision: auto``; TF32 keeps float32's range, so the biases do not
overflow; ``matmul_precision=float32`` restores IEEE float32: tests/emergence/test_precision.py
states the tolerance).
"""

from emergence.families import Family


def toy_config(recipe, common):
    """The toy suite's GPT-NeoX: full rotary, parallel residual, biases, no dropout."""
    from transformers import GPTNeoXConfig

    rope = {"rope_type": "default", "rope_theta": float(recipe.rope_theta), "partial_rotary_factor": 1.0}
    return GPTNeoXConfig(rope_parameters=rope, use_parallel_residual=True, hidden_dropout=0.0,
                         attention_dropout=0.0, attention_bias=True, **common)


FAMILY = Family(
    name="gpt_neox",
    model_types=("gpt_neox",),
    layers="gpt_neox.layers",
    attention="attention",
    projection="attention.dense",
    accelerator_dtype="float32",
    float16_refused="Pythia's Q/K biases overflow in fp16",
    toy_config=toy_config,
    description="GPT-NeoX / Pythia",
)
