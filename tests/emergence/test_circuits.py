"""Participation ratio on known covariances, group ablation, and hook hygiene."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from tiny_models import tiny_model
from emergence import EmergenceError
from emergence.adapters import adapter_for
from emergence.config import AblationConfig, ScreenConfig
from emergence.probes import synthetic_induction
from emergence.screens import screen
from emergence.screens.ablation import group_ablation
from emergence.screens.head_ablation import ablated
from emergence.screens.participation import ParticipationRatioReducer, participation_ratio


def probe(n_sequences=40, n=15, batch_size=16):
    return synthetic_induction(range(1, 90), n_sequences, n, first_token=0, seed=0, batch_size=batch_size)


def scatter(z):
    c = z - z.mean(0)
    return c.T @ c


@pytest.mark.parametrize("P", [200, 2000])
def test_pr_of_isotropic_outputs_is_close_to_d_head(P):
    d = 32
    z = np.random.default_rng(1).normal(size=(P, d))
    plain = participation_ratio(scatter(z), P)
    corrected = participation_ratio(scatter(z), P, corrected=True)
    # Plain estimate is biased low by about d/(1 + d/P); the corrected one is within 5%.
    assert plain < d and plain == pytest.approx(d / (1 + d / (P - 1)), rel=0.05)
    assert corrected == pytest.approx(d, rel=0.05)


def test_pr_of_rank_one_outputs_is_close_to_one():
    P, d = 2000, 32
    rng = np.random.default_rng(2)
    direction = rng.normal(size=d)
    z = rng.normal(size=(P, 1)) * direction + 1e-3 * rng.normal(size=(P, d))
    assert participation_ratio(scatter(z), P) == pytest.approx(1.0, abs=0.01)
    assert participation_ratio(scatter(z), P, corrected=True) == pytest.approx(1.0, abs=0.01)


def test_pr_of_known_spectrum():
    """Covariance diag(1,1,1,1,0...): PR = 4 exactly in the limit."""
    P, d = 4000, 16
    z = np.zeros((P, d))
    z[:, :4] = np.random.default_rng(3).normal(size=(P, 4))
    assert participation_ratio(scatter(z), P, corrected=True) == pytest.approx(4.0, rel=0.03)


def test_pr_reducer_uses_fixed_second_half_samples_in_float64():
    model = tiny_model("olmo")
    adapter = adapter_for(model)
    p = probe(n_sequences=40, n=15)
    reducer = ParticipationRatioReducer(samples=300, seed=0)
    reducer.begin(adapter, p)
    assert reducer.n_samples == 300
    # Only second-half queries (positions 16..30) are ever sampled; never position 0.
    positions = reducer.chosen.nonzero()[:, 1]
    assert positions.min() >= 16 and positions.max() <= 30
    again = ParticipationRatioReducer(samples=300, seed=0)
    again.begin(adapter, p)
    assert torch.equal(reducer.chosen, again.chosen)
    # Feed isotropic outputs to layer 0 and rank-1 outputs to layer 1 through the reducer.
    rng = torch.Generator().manual_seed(0)
    for batch in p.batches():
        reducer.start_batch(batch)
        B, T = batch.shape
        iso = torch.randn(B, T, adapter.n_heads, adapter.head_dim, generator=rng)
        rank1 = torch.randn(B, T, adapter.n_heads, 1, generator=rng) * torch.ones(adapter.head_dim)
        reducer.head_outputs(0, iso)
        reducer.head_outputs(1, rank1)
    part = reducer.finish()
    d = adapter.head_dim
    assert np.all(np.abs(part.heads["pr_corrected"][0] - d) < 0.15 * d)
    assert np.allclose(part.heads["pr"][1], 1.0, atol=1e-6)
    assert (part.heads["pr_samples"] == 300).all()


def test_screen_reports_pr_per_head_and_summary():
    model = tiny_model("gpt_neox")
    cfg = OmegaConf.structured(ScreenConfig(participation_ratio=True))
    cfg.pr.samples = 200
    result = screen(model, adapter_for(model), probe(), cfg, progress=False)
    assert {"pr", "pr_corrected", "pr_samples"} <= set(result.heads.columns)
    assert (result.heads["pr"] >= 1).all() and (result.heads["pr"] <= adapter_for(model).head_dim).all()
    assert result.metrics["pr.mean"] == pytest.approx(result.heads["pr"].mean())


def outputs(model, ids):
    with torch.no_grad():
        return model(ids).logits


def test_hooks_are_clean_after_every_screen(family):
    model = tiny_model(family)
    ids = probe().input_ids[:4]
    before = outputs(model, ids)
    cfg = OmegaConf.structured(ScreenConfig(participation_ratio=True))
    cfg.pr.samples = 100
    cfg.ablation = OmegaConf.structured(AblationConfig(group="list", heads=["1.0", "2.3"], controls=2,
                                                       n_sequences=16))
    screen(model, adapter_for(model), probe(), cfg, progress=False)
    assert torch.equal(outputs(model, ids), before)
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks


def test_ablation_edits_only_the_group_and_empty_group_changes_nothing(family):
    model = tiny_model(family)
    adapter = adapter_for(model)
    ids = probe().input_ids[:4]
    clean = outputs(model, ids)
    with ablated(adapter, [], "zero"):
        assert torch.equal(outputs(model, ids), clean)
    with ablated(adapter, [(1, 2)], "zero"):
        assert not torch.allclose(outputs(model, ids), clean)
    result = group_ablation(model, adapter, probe(), [], mode="mean", controls=5)
    assert result.effect == 0.0 and result.loss_group == result.loss_clean
    assert torch.equal(outputs(model, ids), clean)


def test_excluded_heads_are_never_drawn_as_controls():
    model = tiny_model("gpt_neox")
    adapter = adapter_for(model)
    heads = [(l, h) for l in range(adapter.n_layers) for h in range(adapter.n_heads)]
    group, pool = [(1, 0)], [(2, 3)]
    exclude = [x for x in heads if x not in group + pool]
    result = group_ablation(model, adapter, probe(n_sequences=16), group, mode="zero", controls=4,
                            exclude=exclude, progress=False)
    # (2, 3) is the only head left to draw, so every control is that one head
    only = group_ablation(model, adapter, probe(n_sequences=16), pool, mode="zero", controls=0, progress=False)
    assert np.allclose(result.control_effects, only.effect)
    unrestricted = group_ablation(model, adapter, probe(n_sequences=16), group, mode="zero", controls=4,
                                  progress=False)
    assert not np.allclose(unrestricted.control_effects, only.effect)


def test_screen_ablation_keeps_previous_token_heads_out_of_the_controls_by_default():
    """The composed ``screen=ablation`` draws controls outside the group and the heads
    flagged previous-token (a documented departure); ``control_exclude=[]`` is METHODS."""
    from emergence import catalog

    model = tiny_model("gpt_neox")
    adapter = adapter_for(model)
    total = adapter.n_layers * adapter.n_heads
    p = probe(n_sequences=16)
    cfg = catalog.compose(["model=toy_neox", "screen=ablation"]).screen
    assert list(cfg.ablation.control_exclude) == ["previous_token"]
    # A random model flags nothing at the study's thresholds; flag the top half here.
    plain = OmegaConf.merge(cfg, {"ablation": None})
    selectivity = screen(model, adapter, p, plain, progress=False).heads["selectivity.previous_token"]
    cfg.thresholds.previous_token = float(np.median(selectivity))
    cfg.ablation.group, cfg.ablation.heads, cfg.ablation.controls = "list", ["0.0"], 3
    result = screen(model, adapter, p, cfg, progress=False)
    previous = {tuple(x) for x in result.heads.loc[result.heads["flag.previous_token"] == 1,
                                                   ["layer", "head"]].to_numpy()}
    assert 0 < len(previous - {(0, 0)}) < total - 1
    assert result.metrics["ablation.control_pool"] == total - len(previous | {(0, 0)})
    cfg.ablation.control_exclude = []
    methods = screen(model, adapter, p, cfg, progress=False)
    assert methods.metrics["ablation.control_pool"] == total - 1


def test_unknown_control_exclude_class_is_named():
    model = tiny_model("olmo")
    cfg = OmegaConf.structured(ScreenConfig())
    cfg.ablation = OmegaConf.structured(AblationConfig(control_exclude=["prev_token"], n_sequences=16))
    with pytest.raises(EmergenceError, match="'prev_token'.*valid: induction"):
        screen(model, adapter_for(model), probe(n_sequences=16), cfg, progress=False)


def test_zero_and_mean_ablation_replace_the_o_proj_input_slice():
    from emergence.screens.head_ablation import HeadMeanReducer
    from emergence.screens.base import run_pass

    model = tiny_model("olmo")
    adapter = adapter_for(model)
    p = probe(n_sequences=16)
    seen = {}

    def record(_module, args):  # registered after the ablation hook, so it sees the edited input
        seen["z"] = args[0].view(*args[0].shape[:-1], adapter.n_heads, adapter.head_dim).clone()

    with ablated(adapter, [(2, 1)], "zero"):
        handle = adapter.output_projections[2].register_forward_pre_hook(record)
        try:
            outputs(model, p.input_ids)
        finally:
            handle.remove()
    assert torch.count_nonzero(seen["z"][..., 1, :]) == 0
    assert torch.count_nonzero(seen["z"][..., 0, :]) > 0
    means = HeadMeanReducer()
    run_pass(model, adapter, p, [means], progress=False)
    with ablated(adapter, [(2, 1)], "mean", means.means):
        handle = adapter.output_projections[2].register_forward_pre_hook(record)
        try:
            outputs(model, p.input_ids)
        finally:
            handle.remove()
    expected = means.means[2][:, 1, :].float()
    assert torch.allclose(seen["z"][0, :, 1, :], expected, atol=1e-6)
    assert torch.allclose(seen["z"][5, :, 1, :], expected, atol=1e-6)


def test_ablation_p_value_counts_controls():
    from emergence.screens.ablation import AblationResult

    r = AblationResult([(0, 0)], 1.0, 0.5, 3.0, 0.1, np.array([0.1, 0.2, 2.5, 0.3]), pool_size=8)
    assert r.effect == 2.0
    assert r.p_value == pytest.approx((1 + 1) / 5)
    assert r.metrics()["ablation.control_max"] == 2.5
