"""Issue 30: any decoder by its config.json (``model.family: auto``), the families GPT-2, Qwen3,
Gemma 1-3, Phi, GPT-J, BLOOM and a generic one, ``python -m emergence.families check``, and
refusals before any weights are read.

Tiny random-weight checkpoints of each type are built here (tests/tiny_models.py
``save_decoder``) and screened by ONE model YAML with ``family: auto`` from a user config folder
(``$EMERGENCE_CONFIG_DIRS``, what ``--config-dir`` sets), ``model.path`` pointing at each."""

from __future__ import annotations

import os
import commands
import sys
from pathlib import Path

import numpy as np
import pytest

from emergence import EmergenceError, families
from emergence.families import Family
from tiny_models import DECODERS, save_decoder

pytestmark = pytest.mark.cli

ROOT = Path(__file__).resolve().parents[2]

#: The one YAML every tiny decoder is screened by (model.path set per test).
TINY_YAML = """\
name: tiny_decoder
family: auto
path: /nowhere
revisions: folder
dtype: auto
"""


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    """model type -> a folder of step0/ and step100/ tiny checkpoints (with revisions.json)."""
    root = tmp_path_factory.mktemp("decoders")
    return {t: save_decoder(root / t, t) for t in DECODERS}


@pytest.fixture
def user_conf(tmp_path, monkeypatch):
    conf = tmp_path / "myconf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "tiny_decoder.yaml").write_text(TINY_YAML)
    monkeypatch.setenv("EMERGENCE_CONFIG_DIRS", str(conf))
    return conf


def compose(overrides):
    from emergence.catalog import compose as registry_compose

    return registry_compose(overrides)


def quick(tmp_path, *extra):
    return ["corpus.n_sequences=16", "corpus.batch_size=16", "corpus.segment_length=8", "stats=false",
            f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"tracking.artifacts={tmp_path}/art", *extra]


def test_the_registry_holds_the_new_families_and_auto():
    assert families.family_names() == ("bloom", "gemma", "generic", "gpt2", "gpt_neox", "gptj", "llama", "olmo",
                                       "olmoe", "phi", "qwen3")
    assert families.family_choices()[0] == "auto"
    assert {t: families.family_for_model_type(t).name for t in DECODERS if DECODERS[t] != "generic"} == \
        {t: f for t, f in DECODERS.items() if f != "generic"}
    assert families.family_for_model_type("starcoder2") is None  # (the generic family takes it: tested below)


#: Screened in the default run (one of each kind of family); the others are marked slow.
QUICK = ("gpt2", "bloom", "starcoder2")


@pytest.mark.parametrize("model_type", [t if t in QUICK else pytest.param(t, marks=pytest.mark.slow) for t in DECODERS])
def test_one_yaml_with_family_auto_screens_every_decoder(decoders, user_conf, tmp_path, model_type):
    """The same model YAML (family: auto) screens each tiny decoder; the run logs the family its
    config.json picked, one finite row per head."""
    import mlflow
    import pandas as pd

    from emergence.job import run_job

    cfg = compose(["model=tiny_decoder", f"model.path={decoders[model_type]}", "revision=all",
                   *quick(tmp_path)])
    assert cfg.model.family == "auto"
    results = run_job(cfg, progress=False)
    assert [r.revision.name for r in results] == ["step0", "step100"]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    run = client.get_run(results[-1].run_id)
    assert run.data.params["family"] == DECODERS[model_type]
    assert (run.data.params["n_layers"], run.data.params["n_heads"]) == ("2", "4")
    heads = pd.read_csv(client.download_artifacts(results[-1].run_id, "heads.csv", str(tmp_path)))
    assert len(heads) == 2 * 4 and np.isfinite(heads["selectivity.induction"]).all()


@pytest.mark.parametrize("model_type", list(DECODERS))
def test_the_family_check_passes_on_every_decoder(decoders, model_type):
    from emergence.family_check import run_checks

    lines = run_checks(str(decoders[model_type]), say=lambda _line: None)
    assert [line.name for line in lines] == ["family", "attention rows", "attention output", "head outputs",
                                             "last-query rows", "head ablation", "prefix reuse", "head ablation",
                                             "prefix reuse"]
    assert all(line.passed for line in lines), [str(line) for line in lines if not line.passed]
    assert lines[0].detail.startswith(f"{DECODERS[model_type]} for model type {model_type!r}")


def test_bloom_rows_are_transformers_output_attentions(decoders):
    """BLOOM (ALiBi, no SDPA path, no attention interface) is screened through its own eager
    attention: the screen's rows equal output_attentions exactly."""
    from emergence.family_check import run_checks

    lines = {line.name: line for line in run_checks(str(decoders["bloom"]), say=lambda _line: None)}
    assert "loaded with eager attention" in lines["family"].detail
    assert "max |difference| 0.00e+00" in lines["attention rows"].detail


def test_the_check_command_fails_a_family_with_the_wrong_projection(decoders):
    """A GPT-2 family hooked at c_attn (same width as the merged heads) passes the shape check but
    fails the ablation checks: the command says so and exits 1."""
    saved = families.families()["gpt2"]
    families.unregister("gpt2")
    families.register(Family(name="gpt2", model_types=("gpt2",), layers="transformer.h", attention="attn",
                             projection="attn.c_attn"))
    try:
        from emergence.families.__main__ import main

        assert main(["check", str(decoders["gpt2"])]) == 1
        from emergence.family_check import run_checks

        failed = [line.name for line in run_checks(str(decoders["gpt2"]), say=lambda _line: None) if not line.passed]
        assert "head ablation" in failed
    finally:
        families.register(saved, replace=True)


# --- refused before any weights: contradicting family, uncovered type ----------------------------

def _poison_weights(folder: Path) -> None:
    """Make every weights file unreadable garbage: a load would fail with a different error."""
    for weights in folder.rglob("*.safetensors"):
        weights.write_bytes(b"not weights")


def test_a_contradicting_family_is_refused_before_any_load(decoders, user_conf, tmp_path):
    import shutil

    from emergence.job import run_job

    folder = tmp_path / "gpt2"
    shutil.copytree(decoders["gpt2"], folder)
    _poison_weights(folder)
    cfg = compose(["model=tiny_decoder", f"model.path={folder}", "model.family=llama", "revision=all",
                   *quick(tmp_path)])
    with pytest.raises(EmergenceError) as caught:
        run_job(cfg, progress=False)
    text = str(caught.value)
    assert "model.family=llama contradicts the checkpoint" in text and "model type 'gpt2'" in text
    assert "family 'gpt2' covers" in text and "docs/families_and_sources.md, section 'Adding a family'" in text
    assert not (tmp_path / "mlflow.db").exists()  # no store opened, no run logged


def test_a_model_type_no_family_covers_is_refused_before_any_load(tmp_path, user_conf):
    """An unknown model type, and a known one whose attention bypasses the interface (MPT), are
    refused in one line naming the type, the families and the docs section; nothing is loaded."""
    import json

    from emergence.job import run_job

    for model_type, why in (("my_new_arch", "transformers does not know it"),
                            ("mpt", "does not use transformers' attention interface")):
        folder = tmp_path / model_type / "step10"
        folder.mkdir(parents=True)
        config = {"model_type": model_type, "vocab_size": 96, "d_model": 32, "n_heads": 4, "n_layers": 2}
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "model.safetensors").write_bytes(b"not weights")
        cfg = compose(["model=tiny_decoder", f"model.path={folder.parent}", "model.tokens.tokens_per_step=10",
                       *quick(tmp_path)])
        with pytest.raises(EmergenceError) as caught:
            run_job(cfg, progress=False)
        text = str(caught.value)
        assert f"model type {model_type!r}" in text and "is covered by no family" in text, text
        assert why in text and "gpt2 (gpt2)" in text and "section 'Adding a family'" in text, text
        assert not (tmp_path / "mlflow.db").exists()


def test_the_command_line_refuses_a_contradicting_family_in_one_line_exit_2(decoders, tmp_path):
    env = dict(os.environ, EMERGENCE_HOME=str(tmp_path / "home"))
    proc = commands.run([sys.executable, "-m", "emergence", f"model.path={decoders['bloom']}",
                           "model.family=gpt_neox", "revision=all", f"tracking.uri=sqlite:///{tmp_path}/m.db"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: model.family=gpt_neox contradicts the checkpoint: bloom@step0 "
                                                   "has model type 'bloom'"), proc.stderr
    assert not (tmp_path / "m.db").exists()


def test_a_family_and_a_source_from_user_code_through_emergence_plugins(tmp_path, decoders):
    """A module of the user's own (not in the package), named in $EMERGENCE_PLUGINS, adds a family
    and a model source: the families' listing, --help and a dry run see them."""
    (tmp_path / "my_plugin.py").write_text(
        "from emergence.families import Family\n"
        "from emergence.sources.folder import FolderSource\n"
        "FAMILY = Family(name='my_starcoder', model_types=('starcoder2',), layers='model.layers',\n"
        "                attention='self_attn', projection='self_attn.o_proj', description='mine')\n"
        "class Mine(FolderSource):\n"
        "    name = 'my_folders'\n"
        "SOURCE = Mine()\n")
    env = dict(os.environ, EMERGENCE_PLUGINS="my_plugin", EMERGENCE_HOME=str(tmp_path / "home"))
    listing = commands.run([sys.executable, "-m", "emergence.families"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
    assert listing.returncode == 0 and "my_starcoder: starcoder2; model.layers[i].self_attn" in listing.stdout
    plan = commands.run([sys.executable, "-m", "emergence", f"model.path={decoders['starcoder2']}",
                           "model.revisions=my_folders", "revision=all", "dry_run=true"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "dry run: 2 job(s)" in plan.stdout and "starcoder2" in plan.stdout
