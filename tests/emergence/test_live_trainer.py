"""LiveCallback in a real HF Trainer run of a tiny GPT-NeoX on the CPU.

The screen's attention is switched as in the refinement tests (tests/switching_revisions.py):
from step 23 on, the model's config says ``switched_on`` and its heads (1, 1) and (2, 2)
read as induction heads, so the induction count jumps from 0 to 2 between the watch
screens at steps 20 and 25. The callback must save both (the lookback copy of step 20),
then the dense window after the jump; its runs reach the store while training runs, and
``stats`` reads them as a curve whose largest jump lies between adjacent checkpoints.
The training is killed at step 26 (inside the dense window) and resumed from its last
checkpoint with a new Trainer and callback: the monitor's state comes back from the
checkpoint, so the checkpoints and runs are those of one uninterrupted training.
"""

from __future__ import annotations

import json

import pytest
import torch

import switching_revisions

pytestmark = pytest.mark.store

SWITCH = 23


class Sequences(torch.utils.data.Dataset):
    def __init__(self, n=400, T=64, vocab=128):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, vocab, (n, T), generator=g)
        self.ids[:, 0] = 0

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from transformers import AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments

    from emergence.live import LiveCallback, folder_config
    from tiny_models import tiny_config

    tmp = tmp_path_factory.mktemp("trainer")
    uri = f"sqlite:///{tmp}/store/mlflow.db"
    cfg = folder_config("tiny_trainer", tmp / "run", family="gpt_neox", tokens_per_step=4 * 64, overrides=[
        "live=adaptive", "live.first_step=2", "live.screens_per_decade=10", "live.saves_per_decade=0.5",
        "live.dense_every=2", "live.settle=2", "live.classes=[induction]", "live.loss_drop=null",
        "live.n_sequences=8", "corpus.segment_length=12", f"tracking.uri={uri}", "stats=false"])
    seen_during_training = []

    class Switch(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            model.config.switched_on = state.global_step >= SWITCH

    class Crash(Exception):
        pass

    class Observe(TrainerCallback):
        def __init__(self, live, crash_at=None):
            self.live, self.crash_at = live, crash_at

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == self.crash_at:  # killed: what the writer had written is in the store
                self.live.monitor.writer.flush(120)
                raise Crash()
            if state.global_step == 30:
                self.live.monitor.writer.flush(120)
                seen_during_training.append(len(store_runs(uri)))

    def trainer(crash_at=None):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(tiny_config("gpt_neox", vocab_size=128, max_positions=64),
                                                 attn_implementation="sdpa")
        args = TrainingArguments(str(tmp / "run"), max_steps=40, per_device_train_batch_size=4, learning_rate=1e-3,
                                 save_strategy="no", report_to="none", use_cpu=True, logging_strategy="no",
                                 disable_tqdm=True, seed=0)
        live = LiveCallback(cfg)
        return Trainer(model=model, args=args, train_dataset=Sequences(),
                       callbacks=[Switch(), live, Observe(live, crash_at)])

    restore = switching_revisions.install()
    try:
        with pytest.raises(Crash):
            trainer(crash_at=26).train()
        assert not json.loads((tmp / "run" / "revisions.json").read_text())["complete"]
        resumed = trainer()
        resumed.train(resume_from_checkpoint=True)   # from checkpoint-25, the last the Trainer wrote
    finally:
        restore()
    live = next(cb for cb in resumed.callback_handler.callbacks if isinstance(cb, LiveCallback))
    assert live.monitor.screens == 4                    # 27, 29 (dense), 32, 40: it went on from step 25
    return cfg, tmp / "run", uri, seen_during_training


def store_runs(uri):
    import mlflow

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("emergence")
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


def test_the_callback_saves_the_jump_and_the_dense_window_around_the_switch(trained):
    from transformers import AutoModelForCausalLM

    _cfg, folder, _uri, _seen = trained
    listing = json.loads((folder / "revisions.json").read_text())
    names = [r["name"] for r in listing["revisions"]]
    # step 0 and the sparse save at 2; 20 (the lookback copy) and 25 bracket the switch at 23;
    # 27 and 29 the dense window (every 2 steps, two quiet screens); 40 the last step.
    assert names == [f"checkpoint-{s}" for s in (0, 2, 20, 25, 27, 29, 40)]
    assert listing["complete"] is True
    assert [r["tokens"] for r in listing["revisions"]] == [s * 256 for s in (0, 2, 20, 25, 27, 29, 40)]
    for name in names:
        assert AutoModelForCausalLM.from_pretrained(folder / name) is not None
    config = {n: json.loads((folder / n / "config.json").read_text()) for n in ("checkpoint-20", "checkpoint-25")}
    assert not config["checkpoint-20"].get("switched_on") and config["checkpoint-25"]["switched_on"]
    assert (folder / "checkpoint-25" / "live_state.json").is_file()   # the monitor's state, for a resume


def test_runs_reach_the_store_during_training_and_stats_reads_them(trained):
    from stats.analysis import analyse_curve
    from stats.sources.mlflow import read_mlflow

    _cfg, _folder, uri, seen = trained
    runs = store_runs(uri)
    steps = sorted(int(r.data.params["step"]) for r in runs)
    assert steps == [0, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 27, 29, 32, 40]  # every screen, once
    assert 0 < seen[0] < len(runs)                                  # some were in the store at step 30
    counts = {int(r.data.params["step"]): r.data.metrics["count.induction"] for r in runs}
    assert all(counts[s] == (2 if s >= SWITCH else 0) for s in steps)
    tracked = read_mlflow(uri, "emergence", read_heads=False)
    analysis = analyse_curve(tracked.curve("tiny_trainer", "induction"), results=tracked)
    assert analysis.verdict.evidence["max_jump_revisions"] == ["checkpoint-20", "checkpoint-25"]
    assert analysis.verdict.evidence["max_jump_between"] == 0     # adjacent checkpoints


def test_the_saved_checkpoints_are_screened_once(trained):
    from emergence.preflight import validate
    from emergence.screening import screen_revisions
    from emergence.live import live_view

    cfg, _folder, uri, _seen = trained
    view = live_view(cfg)
    plan = validate(view)
    results = screen_revisions(plan.config, plan, progress=False)  # live=adaptive selects revision=all
    assert [r.revision.name for r in results] == [f"checkpoint-{s}" for s in (0, 2, 20, 25, 27, 29, 40)]
    assert all(r.skipped for r in results) and len(store_runs(uri)) == 16


def test_the_trainer_example_of_the_readme_runs_as_written(tmp_path, monkeypatch):
    """The HF Trainer example of docs/live.md, run as written on a tiny GPT-NeoX: only the number of
    steps (and the CPU, a batch size, no progress bar) and, in its overrides, the store and a
    shorter watch grid and probe are changed. Tokens come from ``include_num_input_tokens_seen``."""
    import re
    from pathlib import Path

    # The first import of Trainer replaces the lazy `transformers` module in sys.modules: the name is
    # bound, and patched, after it (else the example's import sees an unpatched module).
    from transformers import Trainer  # noqa: F401
    import transformers
    from transformers import AutoModelForCausalLM

    import emergence.live
    from tiny_models import tiny_config

    text = (Path(__file__).resolve().parents[2] / "docs" / "live.md").read_text()
    (example,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "LiveCallback(cfg)" in b]
    assert len([line for line in example.splitlines() if line.strip()]) <= 10
    real_args, real_config = transformers.TrainingArguments, emergence.live.folder_config
    uri = f"sqlite:///{tmp_path}/store/mlflow.db"
    quick = [f"tracking.uri={uri}", "live.first_step=2", "live.screens_per_decade=5", "live.n_sequences=8",
             "corpus.segment_length=12"]
    monkeypatch.setattr(transformers, "TrainingArguments", lambda *a, **k: real_args(*a, **{
        **k, "max_steps": 12, "per_device_train_batch_size": 4, "use_cpu": True, "disable_tqdm": True,
        "logging_strategy": "no"}))
    monkeypatch.setattr(emergence.live, "folder_config",
                        lambda *a, overrides=(), **k: real_config(*a, overrides=[*overrides, *quick], **k))
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config("gpt_neox", vocab_size=128, max_positions=64),
                                             attn_implementation="sdpa")
    scope = {"model": model, "data": Sequences(n=64)}
    exec(compile(example, "docs/live.md (HF Trainer)", "exec"), scope)
    listing = json.loads((tmp_path / "runs" / "my_model" / "revisions.json").read_text())
    steps = [r["step"] for r in listing["revisions"]]
    assert listing["complete"] and steps[0] == 0 and steps[-1] == 12
    assert all(r["tokens"] == r["step"] * 4 * 64 for r in listing["revisions"])   # counted by the Trainer
    runs = store_runs(uri)
    assert {r.data.params["revision"] for r in runs} >= {r["name"] for r in listing["revisions"]}
