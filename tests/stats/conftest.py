"""Fixtures of the stats tests: a real temporary MLflow store written to the run
contract (emergence/common/: the names the screen writes), and a curve CSV
constructed around the reference study's reported points."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from emergence.common import contract as C
from emergence.common import head_classes

CLASSES = head_classes.names()


# ---------------------------------------------------------------------------------
# A simulated sweep written to MLflow exactly as the contract says
# ---------------------------------------------------------------------------------


def simulate_heads(n_layers, n_heads, tokens, rng, t_bos=1e11, t_ind=1e10, with_pr=True, bos_sharp=False):
    """Per-head tables (one a revision) of a model whose heads form over training.

    BOS heads: layers >= 2; a head's BOS onset is later the farther its layer is from
    the middle (middle-out), or one shared revision when ``bos_sharp``; layers 0-1
    never. Induction: 4 heads in the upper half form around ``t_ind``, their PR is
    elevated one revision before they cross. Previous-token: 3 heads from the start.
    """
    x = np.log10(tokens)
    mid = (n_layers - 1) / 2
    bos_on = np.full((n_layers, n_heads), np.inf)
    for layer in range(2, n_layers):
        for h in range(n_heads):
            if rng.random() < 0.7:
                if bos_sharp:
                    bos_on[layer, h] = np.log10(t_bos)
                else:
                    bos_on[layer, h] = np.log10(t_bos) + 0.35 * abs(layer - mid) + rng.normal(0, 0.3)
    ind_heads = [(n_layers // 2 + i % (n_layers // 2), (3 * i + 1) % n_heads) for i in range(4)]
    cross = {hd: int(np.clip(np.searchsorted(x, np.log10(t_ind)) + rng.integers(-1, 2), 1, len(x) - 1)) for hd in ind_heads}
    tables = []
    for r, xr in enumerate(x):
        rows = []
        for layer in range(n_layers):
            for h in range(n_heads):
                sel = {c: float(rng.uniform(0.5, 3.0)) for c in CLASSES}
                flag = {c: 0 for c in CLASSES}
                if xr >= bos_on[layer, h]:
                    flag["bos"], sel["bos"] = 1, float(rng.uniform(40, 200))
                if (layer, h) in cross and r >= cross[(layer, h)]:
                    flag["induction"], sel["induction"] = 1, float(rng.uniform(60, 300))
                if layer == 1 and h < 3:
                    flag["previous_token"], sel["previous_token"] = 1, float(rng.uniform(40, 80))
                thr = head_classes.default_thresholds()
                prim = [c for c in CLASSES if flag[c]]
                primary = max(prim, key=lambda c: sel[c] / thr[c]) if prim else ""
                row = dict(zip(C.HEAD_KEY_COLUMNS, (layer, h)))
                row.update({C.selectivity_column(c): sel[c] for c in CLASSES})
                row.update({C.flag_column(c): flag[c] for c in CLASSES})
                row[C.PRIMARY_COLUMN] = primary
                row[C.FIRST_TOKEN_COLUMN] = float(min(0.95, 0.1 + 0.8 * flag["bos"] + rng.uniform(0, 0.05)))
                if with_pr:
                    pr = rng.normal(20, 1.0)
                    if (layer, h) in cross and r >= cross[(layer, h)] - 1:
                        pr = rng.normal(45, 1.0)
                    row["pr"] = float(pr)
                    row["pr_corrected"] = float(pr * 1.05)
                    row["pr_samples"] = 500
                rows.append(row)
        tables.append(pd.DataFrame(rows))
    return tables


def write_sweep(uri, artifacts, experiment, model, family, corpus, n_layers, n_heads, tokens, revisions, tables,
                sweep="sweep-1", status="complete"):
    """Write one run per revision with the contract's params, tags, metrics and heads.csv."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment, artifact_location=Path(artifacts).as_uri())
    ts = int(time.time() * 1000)
    tmp = Path(artifacts).parent / "staging"
    tmp.mkdir(parents=True, exist_ok=True)
    for rev, tok, heads in zip(revisions, tokens, tables):
        run = client.create_run(exp_id, tags={C.SWEEP_TAG: sweep, C.CONFIG_HASH_TAG: "abc123"})
        rid = run.info.run_id
        params = {C.MODEL_PARAM: model, C.REVISION_PARAM: rev, C.STEP_PARAM: rev.replace("step", ""),
                  C.TOKENS_PARAM: str(int(tok)), C.FAMILY_PARAM: family, C.PRETRAINING_CORPUS_PARAM: corpus,
                  C.N_LAYERS_PARAM: str(n_layers), C.N_HEADS_PARAM: str(n_heads), C.SCREEN_NAME_PARAM: "all",
                  C.CORPUS_KIND_PARAM: "synthetic_induction", C.THRESHOLD_PARAM_PREFIX + "bos": "30"}
        total = n_layers * n_heads
        metrics = {C.N_HEADS_TOTAL_METRIC: total}
        for c in CLASSES:
            cnt = int(heads[C.flag_column(c)].sum())
            metrics[C.count_metric(c)] = cnt
            metrics[C.fraction_metric(c)] = cnt / total
            metrics[C.mean_selectivity_metric(c)] = float(heads[C.selectivity_column(c)].mean())
            for layer in range(n_layers):
                metrics[C.layer_count_metric(layer, c)] = int(heads.loc[heads["layer"] == layer, C.flag_column(c)].sum())
        n_induction = metrics[C.count_metric("induction")]
        metrics[C.MEAN_FIRST_TOKEN_METRIC] = float(heads[C.FIRST_TOKEN_COLUMN].mean())
        metrics[C.INDUCTION_LOSS_METRIC] = float(5.0 - 0.5 * n_induction)
        metrics[C.INDUCTION_ACCURACY_METRIC] = float(min(1.0, 0.1 * n_induction))
        if "pr" in heads.columns:
            metrics[C.PR_MEAN_METRIC] = float(heads["pr"].mean())
            metrics[C.PR_INDUCTION_MEAN_METRIC] = (
                float(heads.loc[heads[C.flag_column("induction")] > 0, "pr"].mean()) if n_induction else 0.0)
        client.log_batch(rid, metrics=[Metric(k, float(v), ts, 0) for k, v in metrics.items()],
                         params=[Param(k, v) for k, v in params.items()],
                         tags=[RunTag(C.STATUS_TAG, status)])
        path = tmp / C.HEADS_ARTIFACT
        heads.to_csv(path, index=False)
        client.log_artifact(rid, str(path))
        client.set_terminated(rid, "FINISHED")
    return exp_id


def step_tokens(steps, per_step=2_097_152):
    return [s * per_step for s in steps]


@pytest.fixture(scope="session")
def mlflow_store(tmp_path_factory):
    """A store with two simulated models (8 revisions each) plus one incomplete run."""
    root = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{root}/mlflow.db"
    artifacts = root / "mlartifacts"
    rng = np.random.default_rng(7)
    steps = [64, 256, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 143000]
    revs = [f"step{s}" for s in steps]
    toks = step_tokens(steps)
    tables = simulate_heads(8, 8, np.array(toks, float), rng, t_bos=4e10, t_ind=4e9)
    write_sweep(uri, artifacts, "emergence", "toy_neox", "gpt_neox", "synthetic", 8, 8, toks, revs, tables)
    toks2 = [2e9, 5e9, 1e10, 2.3e10, 4.1e10, 1.17e11, 2.64e11, 5e11, 1e12, 3e12]
    revs2 = [f"step{i}-tokens{int(t / 1e9)}B" for i, t in enumerate(toks2)]
    tables2 = simulate_heads(8, 8, np.array(toks2), rng, t_bos=1.8e11, t_ind=2e10, bos_sharp=True)
    write_sweep(uri, artifacts, "emergence", "toy_olmo", "olmo", "synthetic", 8, 8, toks2, revs2, tables2)
    # an unfinished run that must be ignored
    write_sweep(uri, artifacts, "emergence", "toy_olmo", "olmo", "synthetic", 8, 8, [4e12], ["step99-tokens4000B"],
                [tables2[-1]], status="running")
    return {"uri": uri, "artifacts": str(artifacts), "root": root, "experiment": "emergence"}


# ---------------------------------------------------------------------------------
# A curve CSV shaped like the reference study (METHODS section 1, F2 and F3).
# Constructed counts, used as a `source=csv` fixture only; the study's real
# per-head data is bundled (stats/data/) and tested in test_reference_study.py.
# ---------------------------------------------------------------------------------

#: Revisions and head counts constructed around the points the paper reports.
#: Reported (kept exactly): OLMo BOS 7.4 % at 117B -> 70.3 % at 264B (adjacent
#: checkpoints); Pythia BOS a gradual ramp 0 -> ~58 %; OLMoE a gradual ramp to ~76 %
#: reaching 50 % at 419B; induction forms at ~23B (OLMo) and ~20B (OLMoE); OLMo's
#: 67 % of the final induction circuit at 10B, Pythia's at 6B. The other points are
#: NOT reported by the paper: they are assumptions that interpolate plausibly
#: between the reported ones (monotone, small floors), so that each curve has 10
#: log-spaced revisions as in the study.
REFERENCE_STUDY = {
    "pythia_1b": {
        "corpus": "The Pile", "n": 128,  # 16 layers x 8 heads
        "tokens": [s * 2_097_152 for s in (512, 1000, 2000, 3000, 8000, 16000, 33000, 66000, 100000, 143000)],
        "bos": [0, 0, 1, 3, 9, 20, 35, 52, 65, 74],          # 74/128 = 58 %
        "induction": [0, 1, 4, 8, 10, 11, 11, 12, 12, 12],
    },
    "olmo_1b_0724": {
        "corpus": "DCLM", "n": 256,  # 16 x 16
        "tokens": [t * 1e9 for t in (4, 10, 23, 41, 117, 264, 500, 1000, 2000, 3048)],
        "bos": [0, 0, 1, 5, 19, 180, 182, 184, 186, 187],     # 19/256 = 7.4 %, 180/256 = 70.3 %
        "induction": [0, 1, 7, 12, 14, 14, 15, 15, 15, 16],
    },
    "olmoe_1b_7b_0924": {
        "corpus": "OLMoE mix", "n": 256,
        "tokens": [t * 1e9 for t in (20, 41, 84, 168, 419, 838, 1678, 2517, 3356, 5117)],
        "bos": [2, 8, 22, 55, 128, 160, 178, 187, 192, 195],  # 128/256 = 50 % at 419B, 195/256 = 76 %
        "induction": [13, 14, 15, 15, 14, 15, 15, 16, 15, 15],  # already formed at the first checkpoint (20B)
    },
}


def reference_frame():
    rows = []
    for model, d in REFERENCE_STUDY.items():
        for klass in ("bos", "induction"):
            for t, k in zip(d["tokens"], d[klass]):
                rows.append({"model": model, "class": klass, "tokens": t, "k": k, "n": d["n"], "pretraining_corpus": d["corpus"]})
    return pd.DataFrame(rows)


@pytest.fixture(scope="session")
def reference_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("reference") / "reference_study.csv"
    reference_frame().to_csv(path, index=False)
    return path
