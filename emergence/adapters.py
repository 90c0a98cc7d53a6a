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
from typing import List, Optional

from torch import nn

from emergence import EmergenceError
from emergence import families
from emergence.common.checks import first_line
from emergence.families.generic import head_dim


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


def adapter_for(model: nn.Module, family: Optional[str] = None) -> ArchitectureAdapter:
    """The adapter for a loaded causal LM: of ``family`` (a name; ``model.family`` once resolved,
    emergence/catalog.py ``resolve_family``), else of the family its config's ``model_type`` picks
    (:func:`emergence.families.choose` with ``auto``)."""
    config = model.config
    model_type = getattr(config, "model_type", type(model).__name__)
    chosen = families.choose(family or families.AUTO, model_type, type(model).__name__,
                             lambda: generic_problem(model))
    attention = chosen.attention_modules(model)
    return ArchitectureAdapter(family=chosen.name, n_layers=len(attention), n_heads=config.num_attention_heads,
                               head_dim=head_dim(config), attention_modules=attention,
                               output_projections=chosen.output_projections(model))


def generic_problem(model: nn.Module) -> Optional[str]:
    """Why the generic family cannot screen ``model`` (an empty one on the ``meta`` device will
    do), or None: its attention must go through transformers' attention interface, or be an
    eager module returning its weights (emergence/screens/attention.py), and its hook points
    must be found (emergence/families/generic.py)."""
    generic = families.generic_family()
    if generic is None:
        return "no generic family is registered"
    if not getattr(model, "_supports_attention_backend", False):
        return (f"{type(model).__name__} does not use transformers' attention interface, so the screen cannot "
                "read its attention without a family file")
    try:
        generic.hook_paths(model)
    except EmergenceError as exc:
        return f"the generic family finds no hook points: {exc}"
    return None


def config_problem(hf_config) -> Optional[str]:
    """:func:`generic_problem` for a checkpoint's HF config (or its ``config.json`` as a dict),
    checked on an empty model built on the ``meta`` device (no weights read, no memory taken)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if isinstance(hf_config, dict):
        try:
            hf_config = AutoConfig.for_model(**hf_config)
        except Exception as exc:  # noqa: BLE001  (a model type transformers does not know)
            return f"transformers does not know it: {first_line(str(exc), type(exc).__name__)}"
    try:
        with torch.device("meta"):
            empty = AutoModelForCausalLM.from_config(hf_config)
    except Exception as exc:  # noqa: BLE001  (no causal LM of this type in transformers)
        return f"transformers has no causal LM for it: {first_line(str(exc), type(exc).__name__)}"
    return generic_problem(empty)
