"""Phi: HF model types ``phi`` (Phi-1, Phi-1.5, Phi-2) and ``phi3`` (Phi-3, Phi-4 mini).

Hooks: ``model.layers[i].self_attn`` and its output projection: ``self_attn.dense`` for
``phi``, ``self_attn.o_proj`` for ``phi3`` (found per model: :meth:`PhiFamily.hook_paths`).
Partial rotary embeddings and Phi's parallel attention/MLP block are inside the modules.
"""

from dataclasses import dataclass

from emergence.families import Family


@dataclass(frozen=True)
class PhiFamily(Family):
    def hook_paths(self, model):
        projection = "self_attn.dense" if model.config.model_type == "phi" else "self_attn.o_proj"
        return self.layers, self.attention, projection


FAMILY = PhiFamily(
    name="phi",
    model_types=("phi", "phi3"),
    description="Phi-1/1.5/2 (phi), Phi-3/4 mini (phi3)",
)
