"""Family registry: what the screen needs to know about an architecture family.

A *family* is a group of Hugging Face architectures the screen handles the same way
(METHODS section 3). Each one is a :class:`Family` in its own file of this package, named
``FAMILY``; the registry finds those files itself, so adding a family is one file plus its
test (docs/families_and_sources.md). :func:`register` adds one at run time (tests, user code).
Which family screens a checkpoint follows from its HF ``config.model_type`` (:func:`choose`).

Importing this package does not import torch or transformers (the config and help
code import it); the functions that need them import them when called.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from emergence import EmergenceError
from emergence.common.plugins import Registry, external_entries, package_entries

#: dtype names a model config may ask for besides ``auto``.
DTYPE_NAMES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Family:
    """One architecture family. Its hook paths (:attr:`layers`, :attr:`attention`,
    :attr:`projection`) are dotted attribute paths.

    - The attention module calls transformers' attention interface and returns
      ``(attn_output, attn_weights, ...)``: under the screen's attention
      (emergence/screens/attention.py) a forward hook on it reads that layer's attention
      rows ``[batch, heads, rows, key]`` from ``output[1]``.
    - The output projection's INPUT is the concatenation of the per-head outputs,
      ``[batch, T, heads x head_dim]``: a forward pre-hook reads (or ablates) the heads there.
    """

    #: The name a model config gives as ``model.family``.
    name: str
    #: The HF ``config.model_type`` values this family covers.
    model_types: Tuple[str, ...]
    #: From the causal LM to the list of decoder layers (``gpt_neox.layers``); the default is
    #: the common layout's (Llama, OLMo, Gemma, Qwen3, Phi).
    layers: str = "model.layers"
    #: From one decoder layer to its attention module (``attention``; the common layout's by default).
    attention: str = "self_attn"
    #: From one decoder layer to its output projection (``attention.dense``; the common layout's by default).
    projection: str = "self_attn.o_proj"
    #: dtype of ``dtype: auto`` on an accelerator (on the CPU ``auto`` is always float32).
    accelerator_dtype: str = "bfloat16"
    #: Why float16 is refused for this family, or None when it is allowed.
    float16_refused: Optional[str] = None
    #: ``matmul_precision: auto`` runs a float32 model's matrix products in TF32 on CUDA
    #: (emergence/loading.py, ``choose_matmul_precision``); False keeps IEEE float32.
    tf32: bool = True
    #: ``toy_config(recipe, common)``: the HF config of a toy-suite model of this family,
    #: from the recipe and ``common`` (the keyword arguments every family shares, see
    #: emergence/toy/models.py); None for a family the toy suite does not train.
    toy_config: Optional[Callable[[Any, Dict[str, Any]], Any]] = None
    #: One line for help texts: which models the family stands for.
    description: str = ""
    #: True when a decoder layer returns a tuple ``(hidden_states, ...)`` rather than the hidden
    #: states themselves (BLOOM): the prefix runner's skipped layers answer in the same form.
    layer_returns_tuple: bool = False

    def hook_paths(self, model) -> Tuple[str, str, str]:
        """(layers, attention, projection) for a loaded causal LM; the generic family finds
        them in the model itself (emergence/families/generic.py)."""
        return self.layers, self.attention, self.projection

    def covers(self, model_type: str) -> bool:
        """True when this family screens checkpoints of the HF ``model_type``."""
        return model_type in self.model_types

    def dtype_name(self, requested: str, device_type: str) -> str:
        """The dtype (a name from :data:`DTYPE_NAMES`) to load a model of this family in.

        ``auto``: float32 on the CPU, :attr:`accelerator_dtype` on an accelerator. An
        explicit dtype is used as given, except float16 where :attr:`float16_refused`."""
        if requested == "auto":
            return "float32" if device_type == "cpu" else self.accelerator_dtype
        if requested not in DTYPE_NAMES:
            raise EmergenceError(f"unknown dtype {requested!r}; valid: auto, {', '.join(DTYPE_NAMES)}")
        if requested == "float16" and self.float16_refused:
            allowed = ", ".join(["auto"] + [d for d in DTYPE_NAMES if d != "float16"])
            raise EmergenceError(f"dtype float16 is refused for {self.name} ({self.float16_refused}); "
                                 f"valid: {allowed}")
        return requested

    def layer_list(self, model) -> Any:
        """The ``nn.ModuleList`` of decoder layers itself (ablation passes swap entries of it
        for one call: emergence/screens/prefix.py)."""
        return operator.attrgetter(self.hook_paths(model)[0])(model)

    def attention_modules(self, model) -> List[Any]:
        """Per layer, the module whose forward output holds the attention weights."""
        get = operator.attrgetter(self.hook_paths(model)[1])
        return [get(layer) for layer in self.layer_list(model)]

    def output_projections(self, model) -> List[Any]:
        """Per layer, the module whose input is the concatenation of the per-head outputs."""
        get = operator.attrgetter(self.hook_paths(model)[2])
        return [get(layer) for layer in self.layer_list(model)]


def _discover(table: Registry) -> None:
    """Import every module of this package and register its ``FAMILY``, then user code's."""
    for family in package_entries(__name__, __path__, "FAMILY", Family):
        if family.name not in table:
            table.register(family)
    for family in external_entries("emergence.families", "FAMILY", Family):  # user code (entry points, $EMERGENCE_PLUGINS)
        table.register(family, replace=True)


def _check(family: Family, table: Registry) -> None:
    """A model type may belong to one family only: a clash with another family is an error."""
    for other in table.entries().values():
        clash = set(other.model_types) & set(family.model_types)
        if other.name != family.name and clash:
            raise EmergenceError(f"model type(s) {', '.join(sorted(clash))} of family {family.name!r} "
                                 f"already belong to family {other.name!r}")


#: The architecture families, by name.
FAMILIES = Registry("family", discover=_discover, check=_check, order=lambda f: f.name, error=EmergenceError)
#: Add a family (``replace``: over one of the same name); a model type of another family is refused.
register = FAMILIES.register
#: Remove a family added with :func:`register` (tests clean up with it).
unregister = FAMILIES.unregister
#: The family called ``name`` (a model config's ``model.family``); one line naming the valid ones otherwise.
get = FAMILIES.get


#: Every registered family, by name (sorted).
families = FAMILIES.entries
family_names = FAMILIES.names


def supported_model_types() -> Tuple[str, ...]:
    """Every HF ``model_type`` some family covers, sorted."""
    return tuple(sorted(t for f in families().values() for t in f.model_types))


def family_for_model_type(model_type: str) -> Optional[Family]:
    """The family covering the HF ``model_type``, or None."""
    return next((f for f in families().values() if model_type in f.model_types), None)


# --- which family screens a checkpoint (``model.family: auto``, or a named one checked) ------------

#: ``model.family: auto``: the family follows from the checkpoint's ``config.json`` (``model_type``).
AUTO = "auto"
#: Where the docs say how to add a family (named in every refusal).
ADDING_A_FAMILY = "docs/families_and_sources.md, section 'Adding a family'"


def family_choices() -> Tuple[str, ...]:
    """``model.family`` values: ``auto`` and every registered family."""
    return (AUTO,) + family_names()


def listing() -> str:
    """``gpt2 (gpt2), llama (llama, mistral, qwen2), ...``: every family with its model types."""
    return ", ".join(f"{f.name} ({', '.join(f.model_types) or 'any common-layout decoder'})"
                     for f in families().values())


def generic_family() -> Optional[Family]:
    """The family that finds its hook points in the model itself, when registered."""
    return next((f for f in families().values() if getattr(f, "finds_hooks", False)), None)


def choose(requested: str, model_type: str, where: str, generic_problem: Callable[[], Optional[str]]) -> Family:
    """The family that screens a checkpoint of HF ``model_type`` (read from ``where``'s
    ``config.json`` before any weights are loaded) for ``model.family=requested``:

    - ``auto``: the family covering ``model_type``, else the generic family when it can screen
      the model (``generic_problem()`` returns None; else why not);
    - a named family: itself, when it covers ``model_type`` (the generic family: when it can).

    Refused in one line naming the model type, the families and the docs section on adding one."""
    covering = family_for_model_type(model_type)
    generic = generic_family()
    wants_generic = generic is not None and requested in (AUTO, generic.name)
    if requested == AUTO and covering is not None:
        return covering
    if requested != AUTO and not wants_generic:
        if get(requested).covers(model_type):
            return get(requested)
        if covering is not None:
            raise EmergenceError(f"model.family={requested} contradicts the checkpoint: {where} has model type "
                                 f"{model_type!r}, which family {covering.name!r} covers; set model.family=auto "
                                 f"(or {covering.name}). Families: {listing()}. Adding one: {ADDING_A_FAMILY}")
    why = generic_problem() if wants_generic else f"model.family={requested} does not cover it"
    if why is None:
        return generic
    raise EmergenceError(f"model type {model_type!r} of {where} is covered by no family ({why}). Families: "
                         f"{listing()}. Adding one: {ADDING_A_FAMILY}")
