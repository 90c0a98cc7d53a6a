"""Known-answer tests of the selectivity screen on tiny models of the three families."""

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from tiny_models import tiny_model
from emergence.adapters import adapter_for
from emergence.common.head_classes.duplicate_token import earlier_copies
from emergence.common.head_classes.induction import targets as induction_key_targets
from emergence.config import HEAD_CLASSES, ScreenConfig
from emergence.probes import synthetic_induction
from emergence.screens import screen
from forced_attention import forced_attention

PATTERNS = {(2, 0): "previous", (2, 1): "first", (3, 2): "induction", (1, 3): "self", (3, 0): "duplicate"}
EXPECTED = {"previous": "previous_token", "first": "bos", "induction": "induction", "self": "self",
            "duplicate": "duplicate_token"}


def probe(n_sequences=40, n=15, batch_size=16, seed=0):
    return synthetic_induction(range(1, 90), n_sequences, n, first_token=0, seed=seed, batch_size=batch_size)


def screen_cfg(**kw):
    return OmegaConf.structured(ScreenConfig(**kw))


def test_forced_patterns_are_classified(family):
    model = tiny_model(family)
    with forced_attention(PATTERNS, sharpness=0.9):
        result = screen(model, adapter_for(model), probe(), screen_cfg(), progress=False)
    table = result.heads.set_index(["layer", "head"])
    for (layer, head), pattern in PATTERNS.items():
        row = table.loc[(layer, head)]
        assert row["primary"] == EXPECTED[pattern], (family, layer, head, pattern, row.to_dict())
        assert row[f"selectivity.{EXPECTED[pattern]}"] > 50
    others = table.drop(index=list(PATTERNS))
    assert (others["primary"] == "").all()
    flags = others[[f"flag.{c}" for c in HEAD_CLASSES]].to_numpy()
    assert flags.sum() == 0
    assert result.metrics["count.induction"] == 1
    assert result.metrics["count.bos"] == 1
    assert result.metrics["layer2.count.bos"] == 1 and result.metrics["layer0.count.bos"] == 0
    assert result.metrics["fraction.bos"] == pytest.approx(1 / 16)


def test_uniform_attention_scores_one_and_flags_nothing(family):
    model = tiny_model(family)
    with forced_attention({}):
        result = screen(model, adapter_for(model), probe(), screen_cfg(), progress=False)
    for c in HEAD_CLASSES:
        np.testing.assert_allclose(result.heads[f"selectivity.{c}"], 1.0, rtol=1e-4)
        assert result.metrics[f"count.{c}"] == 0
    assert (result.heads["primary"] == "").all()


def test_pure_pattern_has_infinite_selectivity_and_mixture_the_known_value():
    """A head with mass s on the target and (1-s) spread uniformly has a closed-form S."""
    model = tiny_model("gpt_neox")
    s, n = 0.5, 15
    T = 2 * n + 1
    with forced_attention({(0, 0): "first"}, sharpness=s):
        result = screen(model, adapter_for(model), probe(n=n), screen_cfg(), progress=False)
    got = result.heads.set_index(["layer", "head"]).loc[(0, 0), "selectivity.bos"]
    # Query q sees q+1 keys: key 0 gets s + (1-s)/(q+1), each other key (1-s)/(q+1).
    num = sum(s + (1 - s) / (q + 1) for q in range(1, T))
    den = sum((1 - s) / (q + 1) for q in range(1, T))
    assert got == pytest.approx(num / den, rel=1e-4)
    with forced_attention({(0, 0): "first"}, sharpness=1.0):
        pure = screen(model, adapter_for(model), probe(n=n), screen_cfg(), progress=False)
    assert math.isinf(pure.heads.set_index(["layer", "head"]).loc[(0, 0), "selectivity.bos"])


def test_batch_size_and_streaming_do_not_change_the_answer():
    model = tiny_model("olmo")
    with forced_attention(PATTERNS, sharpness=0.7):
        a = screen(model, adapter_for(model), probe(batch_size=40), screen_cfg(), progress=False)
        b = screen(model, adapter_for(model), probe(batch_size=7), screen_cfg(), progress=False)
    for c in HEAD_CLASSES:
        np.testing.assert_allclose(a.heads[f"selectivity.{c}"], b.heads[f"selectivity.{c}"], rtol=1e-5)
    assert a.metrics["induction_loss"] == pytest.approx(b.metrics["induction_loss"], rel=1e-5)


def test_streaming_screen_matches_the_naive_route():
    """The reducers agree with output_attentions=True plus per-head loops over METHODS' formula."""
    model = tiny_model("gpt_neox", seed=3)
    p = probe(n_sequences=12, n=9)
    result = screen(model, adapter_for(model), p, screen_cfg(), progress=False)
    with torch.no_grad():
        atts = model(p.input_ids, output_attentions=True).attentions
    n = 9
    T = 2 * n + 1
    for layer, att in enumerate(atts):
        A = att.mean(0).double()  # batch average, as METHODS defines A
        for h in range(A.shape[0]):
            num = den = 0.0
            for q in range(n + 1, T):  # induction: target i+1 for q = n+i, key 0 out of the baseline
                i = q - n
                others = [k for k in range(1, q + 1) if k != i + 1]
                num += float(A[h, q, i + 1])
                den += float(A[h, q, others].mean())
            expected = num / den
            got = result.heads.set_index(["layer", "head"]).loc[(layer, h), "selectivity.induction"]
            assert got == pytest.approx(expected, rel=1e-6)


def test_text_targets_come_from_tokens():
    ids = torch.tensor([[0, 5, 6, 7, 5, 6]])
    duplicate, induction = earlier_copies(ids), induction_key_targets(ids, {})
    assert duplicate[0, 4].nonzero().flatten().tolist() == [1]
    assert induction[0, 4].nonzero().flatten().tolist() == [2]
    assert induction[0, 5].nonzero().flatten().tolist() == [3]
    assert not duplicate[0, :4].any()


def test_unknown_class_and_bad_threshold_are_rejected():
    from emergence import EmergenceError

    model = tiny_model("gpt_neox")
    with pytest.raises(EmergenceError, match="unknown head class 'sink'.*valid: induction"):
        screen(model, adapter_for(model), probe(), screen_cfg(classes=["sink"]), progress=False)
    bad = screen_cfg()
    bad.thresholds.bos = -3.0
    with pytest.raises(EmergenceError, match="thresholds.bos=-3.0 must be a positive"):
        screen(model, adapter_for(model), probe(), bad, progress=False)
