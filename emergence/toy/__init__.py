"""The toy suite: small causal LMs of three families trained on the CPU, whose
log-spaced checkpoints are ordinary HF model folders (treated like hub revisions).

Modules: ``recipe`` (config dataclasses), ``corpus`` (synthetic training text),
``models`` (HF configs of the three families), ``train`` (training, layout, caching:
``checkpoint_schedule(recipe)``, ``ensure_trained(recipe, cache_dir, name)``). What the
recipes (``conf/recipe/*.yaml``) form: the formation table of docs/toy-suite.md.

Calibration notes (from the recipe search, per-head tables not re-checked here):
lowering ``rope_theta`` from 10000 to 500 (more rotary frequencies that resolve 64
positions) is what let OLMoE form previous-token heads within the step budget;
OLMo's induction heads are smeared over neighbouring keys of the earlier copy, so
they pass 50x only just. BOS heads are not forced by anything in the recipe: the
first token is simply a fixed token that occurs nowhere else.
"""

from __future__ import annotations

from emergence.toy.recipe import ToyCorpusConfig, ToyRecipeConfig

#: From emergence.toy.train, imported on first use (torch only when training is asked for).
_LAZY = ("checkpoint_schedule", "ensure_trained", "suite_folder", "recipe_hash", "is_complete",
         "train_suite", "as_recipe", "STATE_FILE")
__all__ = ["ToyCorpusConfig", "ToyRecipeConfig", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        from emergence.toy import train

        return getattr(train, name)
    raise AttributeError(f"module 'emergence.toy' has no attribute {name!r}")
