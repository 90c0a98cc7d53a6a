"""The live monitor on the toy trainer: training untouched (bit for bit), resumption, failures.

The fast toy recipe (conf/recipe/fast_neox.yaml: 40 steps, a few seconds) with a watch grid
of 10 screens a decade from step 5; a real MLflow store (SQLite) in a temporary folder.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from emergence.catalog import compose

pytestmark = pytest.mark.store

LIVE = ["model=toy_neox", "recipe@model.recipe=fast_neox", "live=adaptive", "live.first_step=5",
        "live.screens_per_decade=10", "live.saves_per_decade=4", "stats=false"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store for the module (each test its own experiment): a new store's schema costs seconds."""
    return f"sqlite:///{tmp_path_factory.mktemp('store')}/mlflow.db"


def live_cfg(tmp_path, store, *extra):
    return compose(LIVE + [f"cache.toy_dir={tmp_path}/toy", f"tracking.uri={store}",
                           f"tracking.experiment={tmp_path.name}", *extra])


def weights(folder, name):
    return load_file(str(folder / name / "model.safetensors"))


def listing(folder):
    return json.loads((folder / "revisions.json").read_text())


def runs(cfg):
    import mlflow

    client = mlflow.MlflowClient(cfg.tracking.uri)
    exp = client.get_experiment_by_name(cfg.tracking.experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    """The fast recipe trained without a monitor (its fixed schedule: steps 0, 5, 10, 20, 40)."""
    from emergence.toy import ensure_trained

    cfg = compose(LIVE)
    return ensure_trained(cfg.model.recipe, tmp_path_factory.mktemp("fixed"), "toy_neox", progress=False)


@pytest.fixture(scope="module")
def monitored(tmp_path_factory, store):
    from emergence.live.toy import ensure_trained_live

    tmp = tmp_path_factory.mktemp("live")
    cfg = live_cfg(tmp, store)
    folder, logged = ensure_trained_live(cfg, progress=False)
    return cfg, folder, logged


def test_screening_leaves_the_model_its_mode_gradients_rng_and_attention():
    from emergence.adapters import adapter_for
    from emergence.live.screening import attention_implementation, screen_in_training
    from emergence.probes import build_probe
    from emergence.toy import as_recipe
    from emergence.toy.models import build_model

    cfg = compose(LIVE + ["corpus.n_sequences=8"])
    model = build_model(as_recipe(cfg.model.recipe), attn_implementation="sdpa")
    model.train()
    model.gpt_neox.layers[1].eval()                    # a mixed train/eval state is restored as it was
    ids = torch.randint(1, 64, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    expected = (random.random(), np.random.rand(), torch.rand(3))
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    result = screen_in_training(model, adapter_for(model), build_probe(cfg.corpus, model.config), cfg.screen)
    assert "count.induction" in result.metrics and len(result.heads) == 16
    assert (random.random(), np.random.rand()) == expected[:2] and torch.equal(torch.rand(3), expected[2])
    assert model.training and not model.gpt_neox.layers[1].training and model.gpt_neox.layers[2].training
    assert attention_implementation(model) == "sdpa"
    for n, p in model.named_parameters():
        assert torch.equal(p.grad, grads[n]) and torch.equal(p.detach(), before[n]), n


def test_training_with_the_monitor_gives_the_same_weights_bit_for_bit(fixed, monitored):
    _cfg, folder, _logged = monitored
    live_steps = [r["step"] for r in listing(folder)["revisions"]]
    common = sorted(set(live_steps) & {0, 5, 10, 20, 40})
    assert {0, 40} <= set(common) and len(common) >= 3
    for step in common:
        a, b = weights(fixed, f"step{step}"), weights(folder, f"step{step}")
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), step
    assert listing(folder)["train"]["loss_every_25"] == listing(fixed)["train"]["loss_every_25"]


def test_every_saved_checkpoint_is_an_hf_folder_listed_and_screened_once(monitored):
    from transformers import AutoModelForCausalLM

    cfg, folder, logged = monitored
    data = listing(folder)
    assert data["complete"] is True and data["live_hash"] and not (folder / "train_state.pt").exists()
    names = [r["name"] for r in data["revisions"]]
    assert names[0] == "step0" and names[-1] == "step40" and len(names) >= 5
    AutoModelForCausalLM.from_pretrained(folder / names[-1])
    all_runs = runs(cfg)
    by_revision = {}
    for run in all_runs:
        by_revision.setdefault(run.data.params["revision"], []).append(run)
    assert all(len(v) == 1 for v in by_revision.values())          # one run per screen
    assert set(names) <= set(by_revision) and set(logged) == set(by_revision)
    assert len(by_revision) > len(names)                           # screens that were not saved are runs too
    for name, (run,) in by_revision.items():
        p = run.data.params
        saved = name in names
        assert run.data.tags["emergence.live.checkpoint"] == ("saved" if saved else "not saved")
        assert p["registry_index"] == (str(names.index(name)) if saved else "")
        assert p["corpus.n_sequences"] == "64" and p["model.revisions"] == "folder"
        assert p["model.path"] == str(folder) and p["tokens"] == str(int(p["step"]) * 8 * 64)
        assert "count.induction" in run.data.metrics and "induction_loss" in run.data.metrics


def test_an_interrupted_training_resumes_with_the_monitors_state(monitored, tmp_path, store):
    from emergence.live.checkpoints import CheckpointFolder
    from emergence.live.monitor import LiveMonitor
    from emergence.live.toy import ensure_trained_live, live_hash, live_suite_folder, suite_config
    from emergence.toy import as_recipe, recipe_hash
    from emergence.toy.train import train_suite

    _cfg, reference, _ = monitored
    cfg = live_cfg(tmp_path, store)
    folder = live_suite_folder(cfg)
    identity = f"-live-{live_hash(cfg)}"
    extra = {"name": "toy_neox", "recipe_hash": recipe_hash(as_recipe(cfg.model.recipe)) + identity,
             "live_hash": live_hash(cfg)}

    def stop(step):
        if step == 27:
            raise KeyboardInterrupt

    monitor = LiveMonitor(suite_config(cfg, folder), CheckpointFolder(folder, listing_extra=extra))
    with pytest.raises(KeyboardInterrupt):
        train_suite(cfg.model.recipe, folder, "toy_neox", progress=False, on_step=stop, monitor=monitor,
                    identity=identity)
    monitor.writer.close()
    partial = listing(folder)
    assert partial["complete"] is False and partial["revisions"][-1]["step"] < 27
    resumed, _logged = ensure_trained_live(cfg, progress=False)
    assert resumed == folder and listing(folder)["train"]["resumed_from_step"] > 0
    assert listing(folder)["revisions"] == listing(reference)["revisions"]
    for r in listing(folder)["revisions"]:
        a, b = weights(reference, r["name"]), weights(folder, r["name"])
        assert all(torch.equal(a[k], b[k]) for k in a), r["name"]
    revisions = [run.data.params["revision"] for run in runs(cfg)]
    assert len(revisions) == len(set(revisions))                   # the screens redone were not logged twice


def test_a_failing_screen_is_reported_once_and_training_and_saving_go_on(fixed, tmp_path, store, capsys):
    from emergence.live.toy import ensure_trained_live

    cfg = live_cfg(tmp_path, store, "corpus.segment_length=200")        # a probe the 64-token model cannot hold
    folder, logged = ensure_trained_live(cfg, progress=False)
    err = capsys.readouterr().err
    assert err.count("live: the screen at") == 1 and "tried again at the next save" in err
    steps = [r["step"] for r in listing(folder)["revisions"]]
    assert steps[0] == 0 and steps[-1] == 40 and len(steps) >= 4  # the sparse saves went on
    assert not logged and not runs(cfg)
    a, b = weights(fixed, "step40"), weights(folder, "step40")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_store_that_fails_is_reported_once_and_written_when_it_is_back(tmp_path, capsys):
    from emergence.live.toy import ensure_trained_live

    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder")                             # the store's folder cannot be created
    cfg = live_cfg(tmp_path, f"sqlite:///{blocked}/store/mlflow.db")
    from emergence.toy import train

    original = train._save_state

    def unblock_at_step_20(folder, step, *args, **kwargs):        # the store comes back during training
        if step >= 20 and blocked.is_file():
            blocked.unlink()
        return original(folder, step, *args, **kwargs)

    train._save_state = unblock_at_step_20
    try:
        folder, logged = ensure_trained_live(cfg, progress=False)
    finally:
        train._save_state = original
    err = capsys.readouterr().err
    assert err.count("live: could not log the screen") == 1 and "retried at the next save" in err
    names = [r["name"] for r in listing(folder)["revisions"]]
    logged_runs = runs(cfg)
    assert {r.data.params["revision"] for r in logged_runs} >= set(names)   # the backlog was written
    assert set(logged) == {r.data.params["revision"] for r in logged_runs}


def readme_example(marker):
    """The python block of docs/live.md ("Live screening during training") that holds ``marker``."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "live.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if marker in b]
    assert len(blocks) == 1, f"docs/live.md: {len(blocks)} python blocks hold {marker!r}"
    return blocks[0]


def test_the_plain_loop_example_of_the_readme_runs_as_written(tmp_path, store, monkeypatch):
    """The plain-loop example of docs/live.md, run as written on a tiny GPT-NeoX; only the store and a
    shorter watch grid and probe (for a 30-step run of a 64-position model) are added to its overrides."""
    from transformers import AutoModelForCausalLM

    import emergence.live
    from tiny_models import tiny_config

    example = readme_example("LiveMonitor(cfg)")
    assert len([line for line in example.splitlines() if line.strip()]) <= 11
    original = emergence.live.folder_config
    quick = [f"tracking.uri={store}", f"tracking.experiment={tmp_path.name}", "live.first_step=5",
             "live.screens_per_decade=10", "live.n_sequences=8", "corpus.segment_length=12"]
    monkeypatch.setattr(emergence.live, "folder_config",
                        lambda *a, overrides=(), **k: original(*a, overrides=[*overrides, *quick], **k))
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config("gpt_neox", vocab_size=128, max_positions=64),
                                             attn_implementation="sdpa")
    B, T, n_steps = 4, 64, 30
    data = torch.randint(1, 128, (n_steps + 1, B, T), generator=torch.Generator().manual_seed(0))
    scope = {"torch": torch, "model": model, "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-3),
             "B": B, "T": T, "n_steps": n_steps, "batch": lambda step: data[step]}
    exec(compile(example, "docs/live.md (plain loop)", "exec"), scope)
    monitor, run = scope["monitor"], tmp_path / "runs" / "my_run"
    data_ = listing(run)
    names = [r["name"] for r in data_["revisions"]]
    assert data_["complete"] and names[0] == "step0" and names[-1] == "step30"
    assert sorted(p.name for p in run.glob("optimizer-*.pt")) == sorted(f"optimizer-{n[4:]}.pt" for n in names[1:])
    assert all((run / n / "model.safetensors").is_file() for n in names)
    screened = {r.data.params["revision"] for r in runs(monitor.cfg)}
    assert set(names) <= screened and len(screened) == monitor.screens
