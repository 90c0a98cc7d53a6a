"""The generic family: hook points found in the model itself, for decoders of the common layout.

Most Hugging Face decoders are laid out alike: the causal LM holds one ``nn.ModuleList`` of
``num_hidden_layers`` decoder layers; each layer holds an attention module (a child whose
class name ends in ``Attention``) that calls transformers' attention interface, and that
module's output projection (``o_proj``, ``out_proj``, ``dense``, ``c_proj`` or ``wo``) takes
the ``num_attention_heads x head_dim`` per-head outputs. :func:`find_hook_paths` finds the
three paths; ``model.family: auto`` uses this family for a model type no other family covers
(after checking, on an empty model built on the ``meta`` device before any weights are read,
that the paths are found and the attention goes through the interface:
emergence/catalog.py, ``resolve_family``).

Tested (tests/emergence/test_families_auto.py) on ``starcoder2`` and ``granite``, which no family file
names; the named families' types (``llama``, ``qwen3``, ``gemma``, ``phi3``, ``gpt2``...) would
be found too, but their own files say so explicitly.
"""

from dataclasses import dataclass
from typing import Tuple

from emergence import EmergenceError
from emergence.families import Family

#: Names an output projection goes by, in the order they are tried.
PROJECTION_NAMES = ("o_proj", "out_proj", "dense", "c_proj", "wo")


def find_hook_paths(model) -> Tuple[str, str, str]:
    """(layers, attention, projection) of a causal LM of the common layout, or an
    :class:`EmergenceError` saying which part was not found."""
    from torch import nn

    n_layers = getattr(model.config, "num_hidden_layers", None)
    lists = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m) == n_layers]
    if not lists:
        raise EmergenceError(f"no list of {n_layers} decoder layers found in {type(model).__name__}")
    layers, stack = lists[0]
    layer = stack[0]
    found = [(name, m) for name, m in layer.named_modules()
             if name and type(m).__name__.lower().endswith("attention")]
    if not found:
        raise EmergenceError(f"no attention module (a class named ...Attention) in {type(layer).__name__}")
    attention, module = found[0]
    width = model.config.num_attention_heads * head_dim(model.config)
    for name in PROJECTION_NAMES:
        projection = getattr(module, name, None)
        if projection is not None and _input_width(projection) == width:
            return layers, attention, f"{attention}.{name}"
    raise EmergenceError(f"no output projection taking {width} inputs (one of {', '.join(PROJECTION_NAMES)}) "
                         f"in {type(module).__name__}")


def head_dim(config) -> int:
    """One attention head's width: ``config.head_dim``, else ``hidden_size // num_attention_heads``."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def _input_width(module) -> int:
    if hasattr(module, "in_features"):  # nn.Linear
        return int(module.in_features)
    weight = getattr(module, "weight", None)  # transformers' Conv1D: weight [in, out]
    return int(weight.shape[0]) if weight is not None and weight.dim() == 2 else -1


@dataclass(frozen=True)
class GenericFamily(Family):
    #: Marks the family that finds its hooks (emergence.families.generic_family).
    finds_hooks: bool = True

    def hook_paths(self, model):
        return find_hook_paths(model)

    def covers(self, model_type: str) -> bool:
        return False  # (chosen for a type no family covers, after its check: emergence.families.choose)


FAMILY = GenericFamily(
    name="generic",
    model_types=(),
    layers="",
    attention="",
    projection="",
    description="any decoder of the common layout (hook points found in the model)",
)
