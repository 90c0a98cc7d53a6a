"""Loading: hub code path on a real (local) HF cache, offline errors, dtype rules, adapters, eviction."""

import json
import os
import commands
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tiny_models import tiny_model
from emergence import EmergenceError
from emergence.adapters import adapter_for
from emergence.loading import choose_dtype

ROOT = Path(__file__).resolve().parents[2]


def test_dtype_defaults_and_fp16_refused_for_pythia():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert choose_dtype("gpt_neox", "auto", cuda) == torch.float32
    assert choose_dtype("olmo", "auto", cuda) == torch.bfloat16
    assert choose_dtype("olmoe", "auto", cpu) == torch.float32
    assert choose_dtype("olmo", "float16", cpu) == torch.float16
    with pytest.raises(EmergenceError, match="float16 is refused for gpt_neox.*valid: auto, float32, bfloat16"):
        choose_dtype("gpt_neox", "float16", cpu)
    with pytest.raises(EmergenceError, match="unknown dtype 'fp8'; valid: auto, float32"):
        choose_dtype("olmo", "fp8", cpu)


def test_adapters_find_layers_heads_and_hook_points(family):
    model = tiny_model(family, n_layers=4, n_heads=4, d_model=32)
    adapter = adapter_for(model)
    assert (adapter.n_layers, adapter.n_heads, adapter.head_dim) == (4, 4, 8)
    name = {"gpt_neox": "dense", "olmo": "o_proj", "olmoe": "o_proj"}[family]
    names = {m: n for n, m in model.named_modules()}
    assert all(names[p].endswith(name) for p in adapter.output_projections)


def test_unsupported_architecture_lists_the_families():
    """XGLM: a causal LM whose attention bypasses transformers' attention interface (no family,
    and the generic one cannot read it)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("xglm", d_model=16, attention_heads=2,
                                                                  num_layers=1, vocab_size=50, ffn_dim=32))
    with pytest.raises(EmergenceError, match=r"model type 'xglm' of XGLMForCausalLM is covered by no family .*"
                                             r"Families: bloom \(bloom\), .*gpt_neox \(gpt_neox\).*Adding one: "
                                             r"docs/families_and_sources.md"):
        adapter_for(model)


def fake_hub_cache(cache: Path, repo: str, branches):
    """A real HF hub cache layout (blobs, snapshots, refs) holding tiny checkpoints."""
    base = cache / f"models--{repo.replace('/', '--')}"
    for i, branch in enumerate(branches):
        commit = f"{i + 1:040x}"
        snap = base / "snapshots" / commit
        tiny_model("gpt_neox", seed=i).save_pretrained(snap)
        for f in list(snap.iterdir()):
            blob = base / "blobs" / f"{commit[-8:]}{f.name}"
            blob.parent.mkdir(parents=True, exist_ok=True)
            f.rename(blob)
            f.symlink_to(os.path.relpath(blob, f.parent))
        (base / "refs").mkdir(parents=True, exist_ok=True)
        (base / "refs" / branch).write_text(commit)


SCRIPT = textwrap.dedent("""
    import json, sys
    from omegaconf import OmegaConf
    from emergence import EmergenceError
    from emergence.loading import load, evict
    from emergence.revisions import Revision
    cfg = OmegaConf.create({"name": "hubby", "repo": "org/hubby", "path": None, "family": "gpt_neox",
                            "dtype": "auto", "revisions": "snapshot"})
    known = [Revision(10, 10, "step10"), Revision(20, 20, "step20"), Revision(40, 40, "step40")]
    out = {}
    loaded = load(cfg, known[0], known=known, progress=False)
    out["loaded"] = loaded.source
    out["attention"] = loaded.model.config._attn_implementation
    out["device"] = str(next(loaded.model.parameters()).device)
    out["precision"] = loaded.matmul_precision
    try:
        load(cfg, known[1], known=known, progress=False)
    except EmergenceError as exc:
        out["missing"] = str(exc)
    out["freed"] = evict("org/hubby", "step10")
    try:
        load(cfg, known[0], known=known, progress=False)
    except EmergenceError as exc:
        out["after_evict"] = str(exc)
    print(json.dumps(out))
""")


@pytest.mark.cli
def test_hub_loading_from_cache_offline_errors_and_eviction(tmp_path):
    cache = tmp_path / "hub"
    fake_hub_cache(cache, "org/hubby", ["step10"])
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    proc = commands.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["loaded"] == "org/hubby@step10" and out["attention"] == "sdpa"  # the screen switches it per pass
    assert out["device"] == "cpu" and out["precision"] == "float32"
    assert "org/hubby at revision 'step20' is not in the local HF cache and HF_HUB_OFFLINE is set" in out["missing"]
    assert "hf download org/hubby --revision step20" in out["missing"]
    assert out["freed"] > 0
    assert "'step10' is not in the local HF cache" in out["after_evict"]
    snapshots = cache / "models--org--hubby" / "snapshots"
    assert not snapshots.exists() or not any(snapshots.iterdir())
