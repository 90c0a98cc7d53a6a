"""Architecture adapters: where a loaded model keeps its layers, heads and hook points.

Chosen from the loaded model's class. Per-head outputs live at the INPUT of the
output projection (METHODS section 3): GPT-NeoX ``gpt_neox.layers[i].attention.dense``,
OLMo / OLMoE / Llama-style ``model.layers[i].self_attn.o_proj``. The attention
module's forward returns ``(attn_output, attn_weights)`` under eager attention, so a
forward hook on it sees one layer's weights at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List

from torch import nn

from emergence import EmergenceError


@dataclass(frozen=True)
class ArchitectureAdapter:
    family: str
    n_layers: int
    n_heads: int
    head_dim: int
    attention_modules: List[nn.Module]
    #: Modules whose INPUT is the concatenation of the per-head outputs.
    output_projections: List[nn.Module]

    @property
    def n_heads_total(self) -> int:
        return self.n_layers * self.n_heads


def _gpt_neox(model: nn.Module) -> Dict[str, object]:
    layers = model.gpt_neox.layers
    return dict(family="gpt_neox", attention=[l.attention for l in layers],
                projection=[l.attention.dense for l in layers])


def _llama_style(family: str) -> Callable[[nn.Module], Dict[str, object]]:
    def build(model: nn.Module) -> Dict[str, object]:
        layers = model.model.layers
        return dict(family=family, attention=[l.self_attn for l in layers],
                    projection=[l.self_attn.o_proj for l in layers])

    return build


#: model_type of the HF config -> how to find its parts.
SUPPORTED = {
    "gpt_neox": _gpt_neox,
    "olmo": _llama_style("olmo"),
    "olmo2": _llama_style("olmo"),
    "olmoe": _llama_style("olmoe"),
    "llama": _llama_style("llama"),
    "mistral": _llama_style("llama"),
    "qwen2": _llama_style("llama"),
}


def adapter_for(model: nn.Module) -> ArchitectureAdapter:
    """The adapter for a loaded causal LM, from its config's ``model_type``."""
    config = model.config
    model_type = getattr(config, "model_type", type(model).__name__)
    try:
        build = SUPPORTED[model_type]
    except KeyError:
        raise EmergenceError(f"unsupported architecture {model_type!r} ({type(model).__name__}); "
                             f"supported: {', '.join(sorted(SUPPORTED))}") from None
    parts = build(model)
    n_heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    return ArchitectureAdapter(family=parts["family"], n_layers=len(parts["attention"]),
                               n_heads=n_heads, head_dim=head_dim,
                               attention_modules=list(parts["attention"]),
                               output_projections=list(parts["projection"]))
