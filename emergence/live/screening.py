"""One live screen of a model in training, without changing its training.

:func:`screen_in_training` runs the public screen (:func:`emergence.screens.screen`) on
the model as it is, inside :func:`untouched`:

- eval mode for the pass (dropout off), the module's previous train/eval flags restored
  afterwards, module by module;
- no gradients: the pass runs under ``torch.inference_mode`` (the screen's own) and
  ``torch.no_grad``, so neither ``.grad`` nor the autograd graph of the step is touched;
- the random number generators (Python's, numpy's global one, torch's CPU generator and
  every CUDA device's) are saved before and restored after, so the training's next
  random draws are the ones it would have made without the screen;
- the attention implementation: the pass asks for eager attention (the screens read
  each layer's weights) and the model's own (SDPA for the toy) is restored afterwards.

Everything is restored whether the screen succeeds or raises. The weights are only read,
so training with and without screens gives bit-identical weights (tests/emergence/test_live_monitor.py).
"""

from __future__ import annotations

import contextlib
import random

import numpy as np
import torch

from emergence.screens import screen


@contextlib.contextmanager
def preserved_rng():
    """Save and restore Python's, numpy's global, torch's CPU and every CUDA device's RNG state."""
    py, np_state, cpu = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(np_state)
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def attention_implementation(model) -> str:
    return getattr(model.config, "_attn_implementation", None) or "eager"


@contextlib.contextmanager
def untouched(model, attention: str = "eager"):
    """Eval mode, no gradients, RNG states and ``attention`` for the block; all restored after."""
    modes = [(m, m.training) for m in model.modules()]
    previous = attention_implementation(model)
    switch = previous != attention and hasattr(model, "set_attn_implementation")
    with preserved_rng():
        try:
            model.eval()
            if switch:
                model.set_attn_implementation(attention)
            with torch.no_grad():
                yield
        finally:
            if switch:
                model.set_attn_implementation(previous)
            for module, training in modes:
                module.training = training


def screen_in_training(model, adapter, probe, screen_cfg):
    """The screen's result (:class:`emergence.screens.ScreenResult`) for ``model`` as it is now."""
    with untouched(model):
        return screen(model, adapter, probe, screen_cfg, progress=False)
