"""The reference study's recipe, ``corpus=xu2026 screen=xu2026``, against naive versions
of its formulas written here (full ``output_attentions=True`` forwards, explicit loops)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
import torch

from tiny_models import save_revisions, tiny_model
from emergence import EmergenceError
from emergence.adapters import adapter_for
from emergence.config import HEAD_CLASSES
from emergence.probes import build_probe, xu2026_shape
from emergence.catalog import compose
from emergence.screens import screen
from emergence.screens.head_ablation import ablated
from emergence.screens.xu2026 import baseline_positions
from emergence.screens.xu2026_ablation import matched_ablation, matched_controls
from forced_attention import forced_attention

pytestmark = pytest.mark.store


# --- the study's algorithms, written out literally ---------------------------------

def literal_batch(n, T=256, lo=100, hi=10000, seed=42):
    """The study's generation loop, call for call."""
    rng = np.random.RandomState(seed)
    tokens, pairs, targets = [], [], []
    for _ in range(n):
        seq = rng.randint(lo, hi, size=T).astype(np.int64)
        a, b = rng.choice(np.arange(lo, hi), size=2, replace=False)
        p = rng.randint(20, T // 2)
        seq[p] = a
        seq[p + 1] = b
        for k in range(T):
            if seq[k] == a and k != p:
                seq[k] = rng.randint(lo, hi)
        for k in range(T):
            if seq[k] == b and k != p + 1:
                seq[k] = rng.randint(lo, hi)
        seq[-1] = a
        tokens.append(seq)
        pairs.append(p)
        targets.append(b)
    return np.stack(tokens), np.array(pairs), np.array(targets)


def literal_baseline(T):
    rng = np.random.RandomState(0)
    sample, avoid = [], {0, T - 1, T - 2, T - 3, T - 4, T - 5, T - 6}
    while len(sample) < 50:
        k = rng.randint(1, T - 1)
        if k not in avoid and k not in sample:
            sample.append(k)
    return sample


def naive_study(model, adapter, ids, targets, pr_n):
    """Selectivity of every class and PR of every head, per the study's formulas, in loops."""
    captured = {}
    hooks = [m.register_forward_pre_hook(lambda _m, a, i=i: captured.setdefault(i, []).append(a[0].detach()))
             for i, m in enumerate(adapter.output_projections)]
    with torch.no_grad():
        attentions = model(ids, output_attentions=True).attentions
    for h in hooks:
        h.remove()
    N, T = ids.shape
    base = literal_baseline(T)
    L, H = adapter.n_layers, adapter.n_heads
    sel = {c: np.zeros((L, H)) for c in HEAD_CLASSES}
    pr = np.zeros((L, H))
    once = {}  # sequence -> position of B, for the sequences where B occurs once in seq[:T-1]
    for n in range(N):
        hits = [k for k in range(T - 1) if int(ids[n, k]) == int(targets[n])]
        if len(hits) == 1:
            once[n] = hits[0]
    for layer in range(L):
        z = captured[layer][0].view(N, T, H, adapter.head_dim)
        for head in range(H):
            rows = attentions[layer][:, head, T - 1, :].double()
            baseline = max(float(np.mean([[float(rows[n, k]) for k in base] for n in range(N)])), 1e-8)
            means = {"previous_token": rows[:, T - 2].mean(), "self": rows[:, T - 1].mean(),
                     "bos": rows[:, 0].mean(), "local": rows[:, [T - 3, T - 4, T - 5, T - 6]].mean()}
            ind = [float(rows[n, k]) for n, k in once.items()]
            dup = [float(rows[n, k - 1]) for n, k in once.items()]
            means["induction"] = sum(ind) / max(len(ind), 1)
            means["duplicate_token"] = sum(dup) / max(len(dup), 1)
            for c in HEAD_CLASSES:
                sel[c][layer, head] = float(means[c]) / baseline
            s = torch.linalg.svdvals(z[:pr_n, T - 1, head, :].double())
            p = s ** 2 / (s ** 2).sum().clamp(min=1e-12)
            pr[layer, head] = math.exp(float(-(p * torch.log(p + 1e-12)).sum()))
    return sel, pr


def sharpen(model, factor=25.0):
    """Scale the query/key weights so that a random model's attention is far from uniform."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if any(k in name for k in ("query_key_value", "q_proj", "k_proj")):
                param.mul_(factor)
    return model


def preset(*overrides):
    return compose(["model=toy_neox", "corpus=xu2026", "screen=xu2026", *overrides])


# --- the probe ----------------------------------------------------------------------

def test_probe_is_the_studys_batch_for_seed_42():
    cfg = preset()
    config = tiny_config_like(vocab=50304, context=2048)
    probe = build_probe(cfg.corpus, config)
    tokens, pairs, targets = literal_batch(2000)
    assert probe.input_ids.shape == (2000, 256) and probe.kind == "xu2026"
    np.testing.assert_array_equal(probe.input_ids.numpy(), tokens)
    np.testing.assert_array_equal(probe.layout.position.numpy(), pairs)
    np.testing.assert_array_equal(probe.layout.target.numpy(), targets)
    # The study's batch, as its loop draws it (written out once from literal_batch).
    assert hashlib.sha256(tokens.tobytes()).hexdigest() == \
        "f363cff3f47768cb6236eaa87807771ac6352847914a495791f45020ca0f90d8"
    assert tokens[0, :8].tolist() == [7370, 960, 5490, 5291, 5834, 6365, 566, 4526]
    assert tokens[1, :4].tolist() == [3972, 9777, 7790, 1540]
    assert pairs[:5].tolist() == [94, 117, 45, 55, 59] and targets[:3].tolist() == [6188, 2938, 6884]
    # Layout: A at p and T-1, B at p+1, tokens in range, no BOS prepended.
    ids = probe.input_ids.numpy()
    rows = np.arange(2000)
    assert (ids[rows, pairs] == ids[:, -1]).all() and (ids[rows, pairs + 1] == targets).all()
    assert ids.min() >= 100 and ids.max() < 10000
    assert probe.layout.valid.all()


def test_validity_follows_the_studys_rule_on_a_small_vocabulary():
    """With 127 token ids B is sometimes redrawn into the filler: those sequences are invalid."""
    cfg = preset("corpus.vocab_lo=1", "corpus.vocab_hi=128", "corpus.seq_len=64", "corpus.n_sequences=300")
    probe = build_probe(cfg.corpus, tiny_config_like(vocab=128, context=64))
    tokens, _, targets = literal_batch(300, T=64, lo=1, hi=128)
    np.testing.assert_array_equal(probe.input_ids.numpy(), tokens)
    once = [(tokens[n, :-1] == targets[n]).sum() == 1 for n in range(300)]
    assert probe.layout.valid.tolist() == once and not all(once)


def test_baseline_positions_are_the_studys():
    for T in (64, 256):
        assert baseline_positions(T).tolist() == literal_baseline(T)
    with pytest.raises(EmergenceError, match="baseline_positions=60 cannot be drawn at seq_len=64"):
        baseline_positions(64, 60)


def tiny_config_like(vocab, context):
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(vocab_size=vocab, max_position_embeddings=context, hidden_size=8, num_attention_heads=2,
                         num_hidden_layers=1)


# --- the screen against the naive formulas -----------------------------------------

def run_preset(model, cfg):
    adapter = adapter_for(model)
    probe = build_probe(cfg.corpus, model.config)
    return probe, adapter, screen(model, adapter, probe, cfg.screen, progress=False)


#: The naive route runs eager attention (``output_attentions=True``); the screen's forward runs
#: SDPA (emergence/screens/attention.py). Their float32 layer outputs differ in the last bits,
#: which sharpened Q/K weights (x25 each: logits x625) amplify to at most about 2e-5 relative by
#: the last layer; with eager outputs the two agree to 1e-15 (the recomputed rows are eager's).
SHARPENED_RTOL = 5e-5


def assert_matches_naive(model, cfg, rtol=1e-5):
    probe, adapter, result = run_preset(model, cfg)
    sel, pr = naive_study(model, adapter, probe.input_ids, probe.layout.target, cfg.screen.xu2026.pr_sequences)
    table = result.heads
    for c in HEAD_CLASSES:
        np.testing.assert_allclose(table[f"selectivity.{c}"].to_numpy(), sel[c].ravel(), rtol=rtol, err_msg=c)
    np.testing.assert_allclose(table["pr"].to_numpy(), pr.ravel(), rtol=rtol)
    assert (table["pr_samples"] == min(cfg.screen.xu2026.pr_sequences, probe.n_sequences)).all()
    assert result.params["screen.pr_definition"] == "exp_entropy_last_position"
    return sel, result


def test_preset_matches_the_naive_formulas_at_the_studys_shape():
    """The preset itself (T = 256, tokens in [100, 10000), seed 42), first 24 sequences."""
    model = sharpen(tiny_model("gpt_neox", vocab_size=10000, max_positions=256))
    cfg = preset("corpus.n_sequences=24", "corpus.batch_size=10", "screen.xu2026.pr_sequences=15",
                 "screen.ablation=null")
    sel, result = assert_matches_naive(model, cfg, rtol=SHARPENED_RTOL)
    spread = np.concatenate([s.ravel() for s in sel.values()])
    assert spread.max() > 3 and spread.min() < 0.5  # far from a uniform head's 1: the check has teeth


def test_override_screens_a_128_token_model_and_matches_the_naive_formulas(family):
    model = sharpen(tiny_model(family, vocab_size=128, max_positions=64))
    cfg = preset("corpus.vocab_lo=1", "corpus.vocab_hi=128", "corpus.seq_len=64", "corpus.n_sequences=120",
                 "corpus.batch_size=32", "screen.xu2026.pr_sequences=50", "screen.ablation=null")
    sel, result = assert_matches_naive(model, cfg, rtol=SHARPENED_RTOL)
    assert result.metrics["xu2026.valid_sequences"] == 119  # sequence 111 has B twice: left out of induction
    assert math.isfinite(result.metrics["induction_loss"]) and result.metrics["induction_targets"] == 120


def test_fitting_to_a_small_model_gives_the_documented_override():
    from emergence.probes import ModelLimits

    cfg = preset()
    shape = xu2026_shape(cfg.corpus, ModelLimits(128, 64, "toy_neox"))
    assert (shape.vocab_lo, shape.vocab_hi, shape.seq_len) == (1, 128, 64)
    assert "corpus.vocab_lo=1 corpus.vocab_hi=128 corpus.seq_len=64" in shape.note
    fitted = build_probe(cfg.corpus, tiny_config_like(vocab=128, context=64))
    explicit = build_probe(preset("corpus.vocab_lo=1", "corpus.vocab_hi=128", "corpus.seq_len=64").corpus,
                           tiny_config_like(vocab=128, context=64))
    assert torch.equal(fitted.input_ids, explicit.input_ids) and "fitted to the model" in fitted.description
    assert xu2026_shape(cfg.corpus, ModelLimits(50304, 2048)).note == ""  # Pythia: the study's batch, unchanged


def test_forced_heads_have_the_known_selectivity():
    """A head putting s on one key and (1-s) uniformly over the T keys scores 1 + sT/(1-s)
    for that key's class; a uniform head scores 1 in every class."""
    model = tiny_model("olmo", vocab_size=128, max_positions=64)
    cfg = preset("corpus.vocab_lo=1", "corpus.vocab_hi=128", "corpus.seq_len=64", "corpus.n_sequences=20",
                 "screen.ablation=null")
    s, T = 0.5, 64
    with forced_attention({(1, 0): "previous", (2, 1): "first", (3, 2): "self"}, sharpness=s):
        _, _, result = run_preset(model, cfg)
    table = result.heads.set_index(["layer", "head"])
    known = 1 + s * T / (1 - s)
    for head, klass in (((1, 0), "previous_token"), ((2, 1), "bos"), ((3, 2), "self")):
        assert table.loc[head, f"selectivity.{klass}"] == pytest.approx(known, rel=1e-5)
        assert table.loc[head, "primary"] == klass and table.loc[head, f"flag.{klass}"] == 1
    uniform = table.loc[(0, 0)]
    for c in HEAD_CLASSES:
        assert uniform[f"selectivity.{c}"] == pytest.approx(1.0, rel=1e-5)
    assert result.metrics["count.bos"] == 1 and result.metrics["layer2.count.bos"] == 1
    assert table.loc[(2, 1), "first_token_attention"] == pytest.approx(s + (1 - s) / T, rel=1e-5)


# --- the ablation ---------------------------------------------------------------------

def test_matched_controls_are_the_studys_draws_per_layer():
    group = [(1, 0), (1, 2), (3, 1)]
    sets = matched_controls(group, n_heads=4, controls=5, seed=0)
    for r, heads in enumerate(sets):
        rng = np.random.RandomState(r)  # the study's matched-random sweep: seeds 0..R-1
        want = [(1, h) for h in sorted(rng.choice([1, 3], size=2, replace=False).tolist())]
        want += [(3, h) for h in sorted(rng.choice([0, 2, 3], size=1, replace=False).tolist())]
        assert heads == want
        assert not set(heads) & set(group)
    assert len({tuple(s) for s in sets}) > 1
    # A full layer has no eligible heads left: capped there, matched elsewhere.
    capped = matched_controls([(0, 0), (0, 1), (0, 2), (0, 3), (2, 1)], n_heads=4, controls=3)
    assert all([h for h in s if h[0] == 0] == [] and len([h for h in s if h[0] == 2]) == 1 for s in capped)
    excluded = matched_controls([(1, 0)], n_heads=4, controls=8, exclude=[(1, 1), (1, 2)])
    assert all(s == [(1, 3)] for s in excluded)


def naive_last_position_loss(model, adapter, ids, targets, heads):
    hooks = []
    for layer in {l for l, _ in heads}:
        idx = [h for l, h in heads if l == layer]

        def hook(_m, args, idx=idx):
            x = args[0].clone()
            for h in idx:
                x[..., h * adapter.head_dim:(h + 1) * adapter.head_dim] = 0
            return (x,)

        hooks.append(adapter.output_projections[layer].register_forward_pre_hook(hook))
    with torch.no_grad():
        logits = model(ids).logits[:, -1].float()
    for h in hooks:
        h.remove()
    return float(torch.nn.functional.cross_entropy(logits, targets))


def test_matched_ablation_group_controls_and_upper_bound():
    model = sharpen(tiny_model("gpt_neox", vocab_size=128, max_positions=64))
    adapter = adapter_for(model)
    cfg = preset("corpus.vocab_lo=1", "corpus.vocab_hi=128", "corpus.seq_len=64", "corpus.n_sequences=24")
    probe = build_probe(cfg.corpus, model.config)
    group = [(2, 1), (2, 3), (3, 0)]
    result = matched_ablation(model, adapter, probe, group, "zero", controls=4, seed=0, progress=False)
    ids, b = probe.input_ids, probe.layout.target
    assert result.clean["loss"] == pytest.approx(naive_last_position_loss(model, adapter, ids, b, []), rel=1e-5)
    assert result.ablated["loss"] == pytest.approx(naive_last_position_loss(model, adapter, ids, b, group), rel=1e-5)
    bound = [(l, h) for l in (2, 3) for h in range(4)]
    assert result.upper["loss"] == pytest.approx(naive_last_position_loss(model, adapter, ids, b, bound), rel=1e-5)
    assert result.upper_size == 8
    assert len(result.controls) == 4
    for heads, control in zip(result.control_sets, result.controls):
        assert sorted(l for l, _ in heads) == [2, 2, 3] and not set(heads) & set(group)
        assert control["loss"] == pytest.approx(naive_last_position_loss(model, adapter, ids, b, heads), rel=1e-5)
    m = result.metrics()
    assert m["ablation.effect"] == pytest.approx(result.ablated["loss"] - result.clean["loss"])
    assert m["ablation.effect_upper_bound"] == pytest.approx(result.upper["loss"] - result.clean["loss"])
    assert m["ablation.p_value"] == pytest.approx((1 + sum(c["loss"] - result.clean["loss"] >= result.effect
                                                           for c in result.controls)) / 5)
    assert m["ablation.upper_bound_size"] == 8 and m["ablation.control_size"] == 3
    assert 0 <= m["ablation.top1_group"] <= m["ablation.top5_group"] <= 1
    assert all(not m._forward_pre_hooks for m in adapter.output_projections)


def test_empty_group_changes_nothing():
    model = tiny_model("olmo", vocab_size=128, max_positions=64)
    adapter = adapter_for(model)
    cfg = preset("corpus.vocab_lo=1", "corpus.vocab_hi=128", "corpus.seq_len=64", "corpus.n_sequences=8")
    probe = build_probe(cfg.corpus, model.config)
    with torch.no_grad():
        clean = model(probe.input_ids).logits
        with ablated(adapter, [], "zero"):
            same = model(probe.input_ids).logits
    assert torch.equal(clean, same)
    result = matched_ablation(model, adapter, probe, [], "zero", controls=5, progress=False)
    m = result.metrics()
    assert m["ablation.effect"] == 0 and m["ablation.controls"] == 0 and m["ablation.group_size"] == 0
    assert math.isnan(m["ablation.p_value"]) and math.isnan(m["ablation.loss_upper_bound"])


# --- configuration errors and the job ---------------------------------------------------

@pytest.fixture(scope="module")
def small_checkpoints(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("ckpt") / "tiny128", "gpt_neox", steps=(10, 100),
                          vocab_size=128, max_positions=64)


def local(folder, *overrides, store=None):
    store = store or folder.parent
    return compose(["model=pythia_70m", "model.name=tiny128", f"model.path={folder}", "model.repo=null",
                    "model.revisions=folder", "revision=final", "corpus=xu2026", "screen=xu2026",
                    "corpus.n_sequences=24", "screen.ablation.n_sequences=24", "screen.ablation.controls=2",
                    f"tracking.uri=sqlite:///{store}/mlflow.db", f"tracking.artifacts={store}/art", *overrides])


@pytest.mark.parametrize("overrides, message", [
    (["corpus.fit_to_model=false"],
     "corpus.vocab_hi=10000 exceeds the usable vocabulary of tiny128 (128 tokens); set corpus.vocab_hi <= 128"),
    (["corpus.vocab_lo=1", "corpus.vocab_hi=128", "corpus.seq_len=128", "corpus.fit_to_model=false"],
     "corpus.seq_len=128 exceeds the context of tiny128 (64 positions); set corpus.seq_len <= 64"),
    (["corpus.seq_len=50"], "corpus.seq_len=50 is too short for screen.recipe=xu2026: its 50 baseline keys lie "
                            "in 1..seq_len-7, so seq_len must be >= 57"),
    (["corpus.seq_len=30"], "corpus.seq_len=30 is too short for the xu2026 probe; it must be >= 42"),
    (["corpus.vocab_lo=50", "corpus.vocab_hi=51"], "corpus.vocab_lo=50 corpus.vocab_hi=51 is not a token range"),
    (["corpus=synthetic_induction"], "screen.recipe=xu2026 needs corpus=xu2026 (its pair positions); got corpus "
                                     "kind 'synthetic_induction'"),
    (["screen.recipe=xu"], "screen.recipe='xu' is unknown; valid: project, xu2026"),
])
def test_bad_values_fail_in_one_line_before_the_model_is_loaded(small_checkpoints, monkeypatch, overrides, message):
    import emergence.job as job
    import emergence.screening

    def no_load(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(emergence.screening, "load", no_load)
    with pytest.raises(EmergenceError) as err:
        job.run_job(local(small_checkpoints, *overrides), progress=False)
    text = str(err.value)
    assert text.startswith(message) and "\n" not in text


def test_run_job_logs_the_usual_heads_csv(small_checkpoints, tmp_path, capsys):
    import mlflow
    import pandas as pd

    from emergence.job import run_job

    (result,) = run_job(local(small_checkpoints, store=tmp_path), progress=False)
    assert "drawn with corpus.vocab_lo=1 corpus.vocab_hi=128 corpus.seq_len=64" in capsys.readouterr().err
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    run = client.get_run(result.run_id)
    p = run.data.params
    assert p["screen.recipe"] == "xu2026" and p["screen.pr_definition"] == "exp_entropy_last_position"
    assert p["probe"].startswith("xu2026 N=24 T=64 vocab=[1,128) seed=42") and "fitted" in p["probe"]
    heads = pd.read_csv(client.download_artifacts(result.run_id, "heads.csv", str(tmp_path)))
    expected = ["layer", "head", *(f"selectivity.{c}" for c in HEAD_CLASSES), "first_token_attention", "pr",
                *(f"flag.{c}" for c in HEAD_CLASSES), "primary"]
    assert set(expected) <= set(heads.columns) and len(heads) == 16
    assert heads["pr"].between(1, 8 + 1e-9).all()  # head_dim 8
    m = run.data.metrics
    for name in ("fraction.bos", "count.induction", "induction_loss", "induction_top5", "pr.mean",
                 "ablation.effect", "xu2026.valid_sequences"):
        assert name in m, name
