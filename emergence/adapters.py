"""Architecture adapters: where a loaded model keeps its layers, heads and hook points.

The adapter of a loaded model comes from the family registry (emergence/families/):
the family whose HF model types hold the model's ``config.model_type`` gives the hook
paths. Per-head outputs live at the INPUT of the output projection (METHODS section 3):
GPT-NeoX ``gpt_neox.layers[i].attention.dense``, OLMo / OLMoE / Llama-style
``model.layers[i].self_attn.o_proj``. The attention module's forward returns
``(attn_output, attn_weights)`` under the screen's attention (emergence/screens/attention.py),
so a forward hook on it sees one layer's weights at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from torch import nn

from emergence import EmergenceError
from emergence import families


@dataclass(frozen=True)
class ArchitectureAdapter:
    """The parts of one loaded model the screens hook into."""

    #: The family's name (``model.family`` of a config of this model).
    family: str
    n_layers: int
    #: Query heads a layer (the attention weights and the projection input have this many).
    n_heads: int
    head_dim: int
    #: Per layer, the module whose forward output holds the attention weights (``output[1]``).
    attention_modules: List[nn.Module]
    #: Modules whose INPUT is the concatenation of the per-head outputs.
    output_projections: List[nn.Module]

    @property
    def n_heads_total(self) -> int:
        return self.n_layers * self.n_heads


def adapter_for(model: nn.Module) -> ArchitectureAdapter:
    """The adapter for a loaded causal LM, from its config's ``model_type``."""
    config = model.config
    model_type = getattr(config, "model_type", type(model).__name__)
    family = families.family_for_model_type(model_type)
    if family is None:
        raise EmergenceError(f"unsupported architecture {model_type!r} ({type(model).__name__}); "
                             f"supported: {', '.join(families.supported_model_types())}")
    attention = family.attention_modules(model)
    n_heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    return ArchitectureAdapter(family=family.name, n_layers=len(attention), n_heads=n_heads, head_dim=head_dim,
                               attention_modules=attention, output_projections=family.output_projections(model))
