"""Qwen3: HF model type ``qwen3`` (dense Qwen3; QK-norm, grouped-query attention).

The per-head RMSNorm of Q and K runs before the attention interface, so the screen's rows
see normed Q and K.
"""

from emergence.families import Family

FAMILY = Family(
    name="qwen3",
    model_types=("qwen3",),
    description="Qwen3 (dense)",
)
