"""The screen's routes equal the ones they replace, on tiny real models of every registered family.

- SDPA with recomputed rows (emergence/screens/attention.py) against the eager route the
  screen ran before (eager attention for every layer's output, the reducers reading its
  full map): every per-head column and metric of both recipes to 1e-5.
- Prefix-reuse ablation (emergence/screens/prefix.py) against one full ablated pass per
  head set (``ablated`` hooks around ``run_pass``): every set's metrics to 1e-5, zero and
  mean replacement, sets starting at layer 0, in the middle, and empty.
- The screen's pass as the ablation's clean pass: ``screen()`` with ablation gives the
  same ablation metrics as :func:`matched_ablation` / :func:`group_ablation` measuring
  their own clean pass.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from tiny_models import tiny_config
from emergence import families
from emergence.adapters import adapter_for
from emergence.config import AblationConfig, ScreenConfig
from emergence.probes import synthetic_induction, xu2026
from emergence.catalog import compose
from emergence.screens import screen
from emergence.screens import attention as screen_attention_module
from emergence.screens.ablation import group_ablation
from emergence.screens.head_ablation import HeadMeanReducer, ablated
from emergence.screens.base import run_pass
from emergence.screens.continuous import InductionLossReducer
from emergence.screens.prefix import run_ablations
from emergence.screens.xu2026 import LastPositionLossReducer
from emergence.screens.xu2026_ablation import matched_ablation

RTOL = 1e-5
#: The families this file builds models of; the others (gpt2, qwen3, gemma, phi, gptj, bloom, generic) have
#: their attention rows, outputs, ablations and prefix reuse checked against transformers' eager attention by
#: the family check (tests/emergence/test_families_auto.py, emergence/family_check.py).
ALL_FAMILIES = ("gpt_neox", "llama", "olmo", "olmoe")


def build(family: str, seed: int = 0, vocab: int = 128, positions: int = 64, sharpen: float = 8.0):
    """A tiny random-weight model of ``family`` (llama: grouped-query attention, 4 query heads
    on 2 K/V heads), eager attention as loaded before, Q/K scaled so attention has structure."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    if family == "llama":
        config = LlamaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                             num_key_value_heads=2, intermediate_size=64, max_position_embeddings=positions,
                             bos_token_id=0, eos_token_id=0, pad_token_id=None, tie_word_embeddings=False)
    else:
        config = tiny_config(family, vocab_size=vocab, max_positions=positions)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if any(k in name for k in ("query_key_value", "q_proj", "k_proj")):
                param.mul_(sharpen)
    return model


class eager_route:
    """The route the screen ran before: transformers' eager attention (the model's own
    ``eager_attention_forward``) computes every layer's output and the full map."""

    def __init__(self, model):
        module = adapter_for(model).attention_modules[0]
        self.eager = sys.modules[type(module).__module__].eager_attention_forward

    def __enter__(self):
        from transformers.modeling_utils import AttentionInterface

        self.mapping = AttentionInterface._global_mapping
        assert "eager" not in self.mapping
        self.mapping["eager"] = self.eager

    def __exit__(self, *exc):
        self.mapping.pop("eager", None)


def synthetic(n_sequences=24, batch_size=10):
    return synthetic_induction(range(1, 128), n_sequences, 15, first_token=0, seed=0, batch_size=batch_size)


def study_probe(n_sequences=24, batch_size=10):
    return xu2026(n_sequences, 64, 1, 128, 42, batch_size)


def xu2026_screen(**ablation):
    cfg = compose(["model=toy_neox", "corpus=xu2026", "screen=xu2026"]).screen
    if ablation:
        cfg.ablation.update(ablation)
    else:
        cfg.ablation = None
    return cfg


def assert_same(a, b, rtol=RTOL):
    for column in a.heads.columns:
        if column in ("layer", "head", "primary") or column.startswith("flag."):
            assert (a.heads[column] == b.heads[column]).all(), column
        else:
            np.testing.assert_allclose(a.heads[column], b.heads[column], rtol=rtol, atol=1e-12, err_msg=column)
    assert a.metrics.keys() == b.metrics.keys()
    for key, value in a.metrics.items():
        assert value == pytest.approx(b.metrics[key], rel=rtol, abs=1e-9, nan_ok=True), key


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_sdpa_with_recomputed_rows_equals_the_eager_route(family):
    model = build(family)
    adapter = adapter_for(model)
    project = OmegaConf.structured(ScreenConfig(participation_ratio=True))
    project.pr.samples = 200
    study = xu2026_screen()
    with eager_route(model):
        before = [screen(model, adapter, synthetic(), project, progress=False),
                  screen(model, adapter, study_probe(), study, progress=False)]
    after = [screen(model, adapter, synthetic(), project, progress=False),
             screen(model, adapter, study_probe(), study, progress=False)]
    for a, b in zip(after, before):
        assert_same(a, b)
    spread = after[1].heads["selectivity.previous_token"]
    assert spread.max() > 1.5 * spread.min()  # attention far from uniform: the comparison has teeth
    assert model.config._attn_implementation == "eager"  # the pass restored the model's own implementation


def test_the_study_pass_computes_only_the_last_row_and_ablation_passes_none(monkeypatch):
    model = build("olmo")
    adapter = adapter_for(model)
    shapes = []
    plain = screen_attention_module.attention_rows

    def spy(query, key, mask, scaling, rows):
        out = plain(query, key, mask, scaling, rows)
        shapes.append(tuple(out.shape))
        return out

    monkeypatch.setattr(screen_attention_module, "attention_rows", spy)
    probe = study_probe(n_sequences=8, batch_size=8)
    screen(model, adapter, probe, xu2026_screen(), progress=False)
    assert shapes and set(shapes) == {(8, adapter.n_heads, 1, 64)}  # one query row a layer, never [T, T]
    shapes.clear()
    matched_ablation(model, adapter, probe, [(1, 0), (2, 1)], controls=2, progress=False)
    assert shapes == []  # the ablation passes read no attention: SDPA only


def full_passes(model, adapter, probe, sets, reducer, mode, means):
    """The old route: one full forward per head set, its heads ablated by hooks."""
    out = []
    for heads in sets:
        r = reducer()
        with ablated(adapter, heads, mode, means):
            run_pass(model, adapter, probe, [r], progress=False)
        out.append(r.finish().metrics)
    return out


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_prefix_reuse_ablation_equals_full_passes(family):
    model = build(family, seed=1)
    adapter = adapter_for(model)
    sets = [[(2, 1), (3, 0)], [(2, 3), (3, 2)], [(0, 1)], [(1, 0), (1, 1), (3, 3)], [], [(3, 0), (3, 1)]]
    cases = [(study_probe(), LastPositionLossReducer), (synthetic(), InductionLossReducer)]
    for probe, reducer in cases:
        means_reducer = HeadMeanReducer()
        run_pass(model, adapter, probe, [means_reducer], progress=False)
        for mode, means in (("zero", None), ("mean", means_reducer.means)):
            got = [part.metrics for part in run_ablations(model, adapter, probe, sets, reducer, mode, means)]
            want = full_passes(model, adapter, probe, sets, reducer, mode, means)
            for heads, g, w in zip(sets, got, want):
                for key in w:
                    assert g[key] == pytest.approx(w[key], rel=RTOL, abs=1e-9), (family, mode, heads, key)
            losses = [w[next(iter(w))] for w in want]
            assert len({round(x, 4) for x in losses}) > 3  # the sets change the loss: the check has teeth
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks
    assert all(type(layer).__name__ != "Skip" for layer in families.get(adapter.family).layer_list(model))


@pytest.mark.parametrize("family", ["gpt_neox", "llama"])
def test_the_screens_pass_serves_as_the_clean_pass(family):
    model = build(family, seed=2)
    adapter = adapter_for(model)
    group = [(2, 0), (3, 1)]
    # The study's recipe: the screen's last-position metrics are the ablation's clean ones.
    cfg = xu2026_screen(group="list", heads=["2.0", "3.1"], controls=3, n_sequences=16)
    probe = study_probe()
    result = screen(model, adapter, probe, cfg, progress=False)
    own = matched_ablation(model, adapter, probe.head(16), group, "zero", controls=3, progress=False).metrics()
    assert_metrics(result.metrics, own)
    # The project recipe, mean replacement: clean loss and head means from the screen's pass.
    project = OmegaConf.structured(ScreenConfig())
    project.ablation = OmegaConf.structured(AblationConfig(group="list", heads=["2.0", "3.1"], controls=3,
                                                           n_sequences=16, control_exclude=[]))
    probe = synthetic()
    result = screen(model, adapter, probe, project, progress=False)
    own = group_ablation(model, adapter, probe.head(16), group, "mean", controls=3, progress=False).metrics()
    assert_metrics(result.metrics, own)


def assert_metrics(got, want):
    """Losses to 1e-5 relative; effects (differences of losses) to 1e-5 of the clean loss."""
    scale = abs(want["ablation.loss_clean"])
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=RTOL, abs=RTOL * scale, nan_ok=True), key
