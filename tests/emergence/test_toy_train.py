"""Toy-suite training with the fast recipe: determinism, layout, loading, interruption."""

from __future__ import annotations

import json
import os
import commands
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from safetensors.torch import load_file

from emergence.toy import as_recipe, checkpoint_schedule, ensure_trained, is_complete, suite_folder
from emergence.toy.train import REVISIONS_FILE, STATE_FILE, train_suite

ROOT = Path(__file__).resolve().parents[2]
FAST = ROOT / "conf" / "recipe" / "fast_neox.yaml"


def fast_recipe(**over):
    raw = OmegaConf.to_container(OmegaConf.load(FAST))
    raw.update(over)
    return as_recipe(raw)


def weights(folder: Path, name: str):
    return load_file(str(folder / name / "model.safetensors"))


def assert_same_suite(a: Path, b: Path, recipe):
    for r in checkpoint_schedule(recipe):
        wa, wb = weights(a, r["name"]), weights(b, r["name"])
        assert wa.keys() == wb.keys()
        for k in wa:
            assert torch.equal(wa[k], wb[k]), f"{r['name']}: {k} differs"


class Interrupt(KeyboardInterrupt):
    pass


def interrupt_at(n):
    def on_step(step):
        if step == n:
            raise Interrupt()
    return on_step


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted training of the fast recipe."""
    rec = fast_recipe()
    folder = ensure_trained(rec, tmp_path_factory.mktemp("ref"), "toy_fast", progress=False)
    return rec, folder


def test_layout_and_revisions_json(reference):
    rec, folder = reference
    assert folder.name.startswith("toy_fast-") and folder == suite_folder(rec, folder.parent, "toy_fast")
    data = json.loads((folder / REVISIONS_FILE).read_text())
    assert data["complete"] is True
    assert data["revisions"] == checkpoint_schedule(rec)
    assert data["recipe"]["steps"] == rec.steps and data["recipe"]["corpus"]["vocab_size"] == 64
    for r in data["revisions"]:
        assert (folder / r["name"] / "config.json").is_file()
        assert (folder / r["name"] / "model.safetensors").is_file()
    assert not (folder / STATE_FILE).exists()
    assert not list(folder.glob(".tmp-*"))
    assert is_complete(folder, rec)


def test_saved_config_is_a_plain_hf_config(reference):
    rec, folder = reference
    config = json.loads((folder / "step40" / "config.json").read_text())
    assert config["model_type"] == "gpt_neox"
    assert config["bos_token_id"] == config["eos_token_id"] == 0
    assert config["vocab_size"] == 64 and config["num_hidden_layers"] == 4
    assert config.get("_attn_implementation") in (None, "eager", "sdpa") and "attn_implementation" not in config
    assert config["rope_parameters"]["partial_rotary_factor"] == 1.0


def test_loads_with_eager_attention_and_returns_attention(reference):
    from transformers import AutoModelForCausalLM

    rec, folder = reference
    model = AutoModelForCausalLM.from_pretrained(folder / "step40", attn_implementation="eager").eval()
    ids = torch.tensor([[0, 5, 6, 7, 5, 6, 7]])
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    assert len(out.attentions) == 4 and out.attentions[0].shape == (1, 4, 7, 7)
    assert torch.allclose(out.attentions[0].sum(-1), torch.ones(1, 4, 7), atol=1e-5)


def test_training_changes_weights_and_lowers_loss(reference):
    rec, folder = reference
    w0, w1 = weights(folder, "step0"), weights(folder, "step40")
    assert any(not torch.equal(w0[k], w1[k]) for k in w0)
    losses = json.loads((folder / REVISIONS_FILE).read_text())["train"]["loss_every_25"]
    assert losses[-1] < losses[0]


def test_deterministic_same_seed_same_weights(reference, tmp_path):
    rec, folder = reference
    again = ensure_trained(rec, tmp_path, "toy_fast", progress=False)
    assert again != folder
    assert_same_suite(folder, again, rec)


def test_other_seed_other_weights(reference, tmp_path):
    rec, folder = reference
    other_rec = fast_recipe(seed=1)
    other = ensure_trained(other_rec, tmp_path, "toy_fast", progress=False)
    assert other.name != folder.name
    w, v = weights(folder, "step40"), weights(other, "step40")
    assert any(not torch.equal(w[k], v[k]) for k in w)


def test_finished_suite_is_not_retrained(reference):
    rec, folder = reference
    stamp = (folder / REVISIONS_FILE).stat().st_mtime_ns
    assert ensure_trained(rec, folder.parent, "toy_fast", progress=False) == folder
    assert (folder / REVISIONS_FILE).stat().st_mtime_ns == stamp


def test_interrupted_training_is_not_finished_and_resumes_to_the_same_weights(reference, tmp_path):
    rec, ref = reference
    folder = suite_folder(rec, tmp_path, "toy_fast")
    with pytest.raises(Interrupt):
        train_suite(rec, folder, "toy_fast", progress=False, on_step=interrupt_at(15))
    assert not (folder / REVISIONS_FILE).exists()
    assert not is_complete(folder, rec)
    assert (folder / "step10" / "model.safetensors").exists() and not (folder / "step20").exists()
    assert torch.load(folder / STATE_FILE, weights_only=False)["step"] == 10
    # A checkpoint half-written when the process died, and a stray temp folder.
    (folder / "step20").mkdir()
    (folder / "step20" / "config.json").write_text("{}")
    (folder / ".tmp-step40-1").mkdir()
    assert not is_complete(folder, rec)

    assert ensure_trained(rec, tmp_path, "toy_fast", progress=False) == folder
    data = json.loads((folder / REVISIONS_FILE).read_text())
    assert data["complete"] and data["train"]["resumed_from_step"] == 10
    assert not (folder / STATE_FILE).exists() and not list(folder.glob(".tmp-*"))
    assert_same_suite(ref, folder, rec)


def test_corrupt_resume_state_restarts_cleanly(reference, tmp_path):
    rec, ref = reference
    folder = suite_folder(rec, tmp_path, "toy_fast")
    with pytest.raises(Interrupt):
        train_suite(rec, folder, "toy_fast", progress=False, on_step=interrupt_at(25))
    (folder / STATE_FILE).write_bytes(b"not a torch file")
    ensure_trained(rec, tmp_path, "toy_fast", progress=False)
    data = json.loads((folder / REVISIONS_FILE).read_text())
    assert data["train"]["resumed_from_step"] == 0
    assert_same_suite(ref, folder, rec)


def test_a_damaged_finished_suite_is_retrained(reference, tmp_path):
    rec, ref = reference
    folder = ensure_trained(rec, tmp_path, "toy_fast", progress=False)
    (folder / "step20" / "model.safetensors").unlink()
    assert not is_complete(folder, rec)
    ensure_trained(rec, tmp_path, "toy_fast", progress=False)
    assert is_complete(folder, rec)
    assert_same_suite(ref, folder, rec)


@pytest.mark.cli
def test_killed_process_leaves_no_finished_suite_and_resumes(reference, tmp_path):
    """SIGKILL mid-training (no cleanup runs), then a fresh process finishes the suite."""
    rec, ref = reference
    script = textwrap.dedent(f"""
        import os, signal
        from omegaconf import OmegaConf
        from emergence.toy import as_recipe, suite_folder
        from emergence.toy.train import train_suite
        rec = as_recipe(OmegaConf.load({str(FAST)!r}))
        def on_step(step):
            if step == 30:
                os.kill(os.getpid(), signal.SIGKILL)
        train_suite(rec, suite_folder(rec, {str(tmp_path)!r}, "toy_fast"), "toy_fast", progress=False,
                    on_step=on_step)
    """)
    proc = commands.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == -9, proc.stderr[-2000:]
    folder = suite_folder(rec, tmp_path, "toy_fast")
    assert (folder / "step20").is_dir() and not (folder / REVISIONS_FILE).exists()
    assert not is_complete(folder, rec)
    ensure_trained(rec, tmp_path, "toy_fast", progress=False)
    assert json.loads((folder / REVISIONS_FILE).read_text())["train"]["resumed_from_step"] == 20
    assert_same_suite(ref, folder, rec)


def test_training_restores_global_torch_settings(tmp_path):
    threads = torch.get_num_threads()
    det = torch.are_deterministic_algorithms_enabled()
    ensure_trained(fast_recipe(steps=5, first_checkpoint=5, n_checkpoints=1), tmp_path, "t", progress=False)
    assert torch.get_num_threads() == threads
    assert torch.are_deterministic_algorithms_enabled() == det


@pytest.mark.parametrize("family", ["olmo", "olmoe"])
def test_other_families_train_and_load(family, tmp_path):
    from transformers import AutoModelForCausalLM, OlmoConfig, OlmoeConfig

    rec = fast_recipe(family=family, steps=10, first_checkpoint=5, n_checkpoints=2,
                      n_experts=4, top_k=2)
    folder = ensure_trained(rec, tmp_path, f"toy_{family}", progress=False)
    assert is_complete(folder, rec)
    model = AutoModelForCausalLM.from_pretrained(folder / "step10", attn_implementation="eager").eval()
    config = model.config
    assert isinstance(config, OlmoeConfig if family == "olmoe" else OlmoConfig)
    assert config.bos_token_id == config.eos_token_id == 0 and config.vocab_size == 64
    assert config.num_hidden_layers == 4
    if family == "olmoe":
        assert config.num_experts == 4 and config.num_experts_per_tok == 2
    with torch.no_grad():
        out = model(input_ids=torch.tensor([[0, 3, 4, 5]]), output_attentions=True)
    assert out.attentions[-1].shape == (1, 4, 4, 4)
