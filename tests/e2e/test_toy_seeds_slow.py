"""End to end (slow: trains): three seeds of the fast toy recipe trained and screened by one
``-m`` sweep, each its own cached suite and its own runs (seed params), read back by
``python -m stats`` as one group of runs; and the data-versus-init split bit for bit."""

import json
import os
import commands
import sys
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from safetensors.torch import load_file

from emergence.common import contract as C
from emergence.toy import as_recipe, checkpoint_schedule, ensure_trained, suite_folder

ROOT = Path(__file__).resolve().parents[2]


def fast(**over):
    raw = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "recipe" / "fast_neox.yaml"))
    raw.update(over)
    return as_recipe(raw)


def same(a: Path, b: Path, name: str) -> bool:
    wa, wb = load_file(str(a / name / "model.safetensors")), load_file(str(b / name / "model.safetensors"))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_three_toy_seeds_are_trained_screened_and_read_back_as_one_group(tmp_path):
    uri, toy = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "toy"
    env = dict(os.environ, EMERGENCE_HOME=str(tmp_path))
    common = [f"tracking.uri={uri}", f"tracking.artifacts={tmp_path}/mlartifacts"]
    sweep = commands.run(
        [sys.executable, "-m", "emergence", "-m", "model=toy_neox", "recipe@model.recipe=fast_neox",
         "model.recipe.seed=0,1,2", f"cache.toy_dir={toy}", f"hydra.sweep.dir={tmp_path}/sweep", *common],
        capture_output=True, text=True, timeout=3000, env=env, cwd=ROOT)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    folders = {seed: suite_folder(fast(seed=seed), toy, "toy_neox") for seed in (0, 1, 2)}
    assert len(set(folders.values())) == 3 and all(f.is_dir() for f in folders.values())  # one suite a seed
    for seed in (0, 1, 2):
        assert f"toy_neox [seed {seed}]" in sweep.stdout  # the sweep's table, one block a seed
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("emergence").experiment_id])
    seeds = [C.run_seed(r.data.params) for r in runs if C.SEED_PARAM in r.data.params]
    screened = [c for c in checkpoint_schedule(fast()) if c["tokens"] > 0]  # logspaced: no 0-token step0
    assert len(seeds) == 3 * len(screened) and set(seeds) == {
        C.RunSeed(str(s), "both", "toy_neox") for s in (0, 1, 2)}

    out = tmp_path / "stats"
    proc = commands.run(
        [sys.executable, "-m", "stats", f"source.tracking_uri={uri}", f"hydra.run.dir={out}", "analysis.progress=false",
         "analysis.n_boot=100", *common], capture_output=True, text=True, timeout=1200, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert {c["model"] for c in summary["curves"]} == {f"toy_neox [seed {s}]" for s in (0, 1, 2)}
    (group,) = summary["pooled_gaps"]
    assert group["model"] == "toy_neox" and group["n_seeds"] == 3
    assert [r["seed"] for r in group["per_seed"]] == ["0", "1", "2"]
    # the fast recipe forms no circuits (4 revisions with tokens, 5 needed for a verdict): no gap to pool, said so
    assert group["ratio"] is None and any("no pooled gap" in n for n in group["notes"])
    assert all(r["shape.bos"].startswith("none") for r in group["per_seed"])
    assert "## Seeds: one model, many training runs" in (out / "report.md").read_text()

    # data against init: seed 1's data with seed 0's weights, and seed 0 spelt out, bit for bit
    data_only = ensure_trained(fast(seed=1, init_seed=0), tmp_path / "split", "toy_neox", progress=False)
    assert same(data_only, folders[0], "step0") and not same(data_only, folders[0], "step40")
    assert not same(data_only, folders[1], "step0")
    explicit = ensure_trained(fast(seed=0, data_seed=0, init_seed=0), tmp_path / "split", "toy_neox", progress=False)
    assert explicit != folders[0] and all(same(explicit, folders[0], r["name"]) for r in checkpoint_schedule(fast()))
