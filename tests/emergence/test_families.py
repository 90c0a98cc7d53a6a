"""The family registry (emergence/families/): one file per family, hook paths, dtype policy,
toy builders; a Llama-style or Qwen2 model is one YAML file; a GPT-2-style family is added
through the registry alone."""

import json
import shutil
import commands
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from emergence import EmergenceError
from emergence import families
from emergence.families import Family

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 96


def test_registry_finds_one_file_per_family_and_the_config_uses_it():
    from emergence.config import FAMILIES

    assert families.family_names() == ("bloom", "gemma", "generic", "gpt2", "gpt_neox", "gptj", "llama", "olmo",
                                       "olmoe", "phi", "qwen3")
    assert FAMILIES == families.family_names()
    assert families.supported_model_types() == ("bloom", "gemma", "gemma2", "gemma3_text", "gpt2", "gpt_neox", "gptj",
                                                "llama", "mistral", "olmo", "olmo2", "olmoe", "phi", "phi3", "qwen2",
                                                "qwen3")
    assert families.family_for_model_type("qwen2").name == "llama"
    assert families.family_for_model_type("olmo2").name == "olmo"
    assert families.family_for_model_type("starcoder2") is None  # (the generic family's, after its check)
    with pytest.raises(EmergenceError, match="unknown family 'bert'; valid: bloom, gemma, generic, gpt2"):
        families.get("bert")


@pytest.mark.cli
def test_importing_the_registries_loads_neither_torch_nor_transformers():
    code = ("import sys; from emergence import families, sources; families.families(); sources.sources(); "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    proc = commands.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "False"]


def test_dtype_policy_is_the_family_s():
    assert families.get("gpt_neox").dtype_name("auto", "cuda") == "float32"
    assert families.get("llama").dtype_name("auto", "cuda") == "bfloat16"
    assert families.get("llama").dtype_name("auto", "cpu") == "float32"
    assert families.get("llama").dtype_name("float16", "cuda") == "float16"
    with pytest.raises(EmergenceError, match=r"float16 is refused for gpt_neox \(Pythia's Q/K biases overflow"):
        families.get("gpt_neox").dtype_name("float16", "cuda")


def test_toy_builders_are_the_families_and_only_trained_families_have_one():
    from emergence.toy import ToyRecipeConfig
    from emergence.toy.models import build_config, check_recipe, toy_families

    assert toy_families() == ("gpt_neox", "olmo", "olmoe")
    for family, model_type in (("gpt_neox", "gpt_neox"), ("olmo", "olmo"), ("olmoe", "olmoe")):
        assert build_config(ToyRecipeConfig(family=family)).model_type == model_type
    with pytest.raises(EmergenceError, match="recipe.family='llama' is unknown; valid: gpt_neox, olmo, olmoe"):
        check_recipe(ToyRecipeConfig(family="llama"))


def test_a_model_type_belongs_to_one_family():
    with pytest.raises(EmergenceError, match="model type.* qwen2 of family 'mine' already belong to family 'llama'"):
        families.register(Family(name="mine", model_types=("qwen2",), layers="model.layers",
                                 attention="self_attn", projection="self_attn.o_proj"))
    assert "mine" not in families.families()


# --- a Llama-style model is one YAML file -------------------------------------------------------

def tiny_config(model_type: str):
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    kind = {"llama": LlamaConfig, "mistral": MistralConfig, "qwen2": Qwen2Config}[model_type]
    # grouped-query attention (4 query heads, 2 key/value heads), as the real models have
    return kind(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128, bos_token_id=0,
                eos_token_id=0, pad_token_id=None, tie_word_embeddings=False)


def save_folders(folder: Path, model_type: str, steps=(0, 100)) -> Path:
    """``<folder>/step<N>/``: one random-weight HF model folder per revision, no revisions.json."""
    from transformers import AutoModelForCausalLM

    for i, step in enumerate(steps):
        torch.manual_seed(i)
        AutoModelForCausalLM.from_config(tiny_config(model_type)).save_pretrained(folder / f"step{step}")
    return folder


def compose_in(conf: Path, overrides):
    from hydra import compose, initialize_config_dir

    import emergence.config  # noqa: F401  (registers the schema)

    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.store
@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
def test_a_llama_style_model_is_one_yaml_file_and_screens(tmp_path, model_type):
    """The shipped template conf/model/_llama_style.yaml, copied with name and path set, is all
    a tiny local Llama / Qwen2 needs: run_job screens both revisions, per-head results logged."""
    import mlflow

    from emergence.job import run_job
    from emergence.catalog import CONF_DIR

    folder = save_folders(tmp_path / "ckpt", model_type)
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    spec = OmegaConf.load(conf / "model" / "_llama_style.yaml")
    spec.name, spec.path, spec.tokens.tokens_per_step = f"tiny_{model_type}", str(folder), 1000
    OmegaConf.save(spec, conf / "model" / f"tiny_{model_type}.yaml")
    cfg = compose_in(conf, [f"model=tiny_{model_type}", "revision=all", "corpus.n_sequences=32",
                            "corpus.batch_size=16", "corpus.segment_length=12", "stats=false",
                            f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"tracking.artifacts={tmp_path}/art"])
    assert cfg.model.family == "llama" and cfg.model.revisions == "folder"
    results = run_job(cfg, progress=False)
    assert [(r.revision.name, r.revision.tokens) for r in results] == [("step0", 0), ("step100", 100_000)]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    for r in results:
        run = client.get_run(r.run_id)
        assert run.data.params["family"] == "llama"
        assert (run.data.params["n_layers"], run.data.params["n_heads"]) == ("2", "4")
        import pandas as pd

        heads = pd.read_csv(client.download_artifacts(r.run_id, "heads.csv", str(tmp_path)))
        assert len(heads) == 2 * 4
        assert np.isfinite(heads["selectivity.induction"]).all()


# --- a GPT-2-style family through the registry alone -------------------------------------------

#: GPT-2's hook points: ``transformer.h[i].attn`` returns (output, weights) under eager
#: attention; ``transformer.h[i].attn.c_proj`` takes the concatenated per-head outputs.
GPT2 = Family(name="gpt2", model_types=("gpt2",), layers="transformer.h", attention="attn",
              projection="attn.c_proj", description="GPT-2 (test)")


@pytest.fixture
def gpt2_family():
    """The test's GPT-2 family in place of the file's (emergence/families/gpt2.py), restored after."""
    saved = families.families()["gpt2"]
    families.unregister("gpt2")
    families.register(GPT2)
    yield GPT2
    families.register(saved, replace=True)


def test_a_gpt2_family_added_through_the_registry_alone_is_screened(gpt2_family, tmp_path):
    from transformers import AutoModelForCausalLM, GPT2Config

    from emergence.config import ScreenConfig
    from emergence.loading import load
    from emergence.probes import synthetic_induction
    from emergence.catalog import model_revisions
    from emergence.screens import screen

    torch.manual_seed(0)
    config = GPT2Config(n_layer=3, n_head=4, n_embd=32, vocab_size=VOCAB, n_positions=128, bos_token_id=0,
                        eos_token_id=0)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "gpt2" / "step10")
    (tmp_path / "gpt2" / "revisions.json").write_text(
        json.dumps({"revisions": [{"name": "step10", "step": 10, "tokens": 5120}]}))
    model_cfg = OmegaConf.create({"name": "tiny_gpt2", "family": "gpt2", "revisions": "folder", "repo": None,
                                  "path": str(tmp_path / "gpt2"), "dtype": "auto"})
    (revision,) = model_revisions(model_cfg)
    loaded = load(model_cfg, revision, device="cpu", progress=False)
    adapter = loaded.adapter
    assert adapter.family == "gpt2"
    assert (adapter.n_layers, adapter.n_heads, adapter.head_dim, adapter.n_heads_total) == (3, 4, 8, 12)
    assert adapter.output_projections[1] is loaded.model.transformer.h[1].attn.c_proj
    probe = synthetic_induction(range(1, 90), 24, 12, first_token=0, seed=0, batch_size=8)
    result = screen(loaded.model, adapter, probe, OmegaConf.structured(ScreenConfig(participation_ratio=True)),
                    progress=False)
    assert len(result.heads) == 3 * 4
    for column in [c for c in result.heads.columns if c.startswith("selectivity.")] + ["pr"]:
        assert np.isfinite(result.heads[column]).all(), column


def test_a_model_no_family_covers_is_refused_naming_the_families():
    """MPT: a causal LM of transformers whose attention bypasses the attention interface, so the
    generic family cannot screen it either."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from emergence.adapters import adapter_for

    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("mpt", d_model=16, n_heads=2, n_layers=1,
                                                                  vocab_size=50))
    with pytest.raises(EmergenceError, match=r"model type 'mpt' of MptForCausalLM is covered by no family \(MptForCausalLM "
                                             r"does not use transformers' attention interface.*Families: bloom \(bloom\)"):
        adapter_for(model)
