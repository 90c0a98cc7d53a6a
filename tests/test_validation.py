"""Validation before work (issue 12, point 3): every value a user can set is checked against
its schema's constraints (emergence/config.py, walked by emergence/validation.py), and the
cross-field checks run in ``emergence.job.validate``, before any model is loaded or trained:
exit status 2 and one stderr line naming the value and the valid choices.

The bad values are derived from the schema itself, so a new field with a constraint is
tested without a new line here. Most cases call the CLI in this process (a subprocess costs
seconds); two real subprocesses prove the exit status and the one-line stderr end to end."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from emergence.config import EmergenceConfig
from emergence.validation import constrained_fields

ROOT = Path(__file__).resolve().parents[1]
#: Owned by the toy recipe (emergence/toy: as_recipe checks it) and the token rule (emergence/revisions.py).
EXEMPT = ("model.recipe", "model.tokens")
#: String fields that hold free text (names, paths, URIs): every other string is a choice.
FREE_TEXT = {"model.name", "model.repo", "model.path", "model.pretraining_corpus", "corpus.path", "revision.name",
             "revision.pin", "screen.name", "tracking.uri", "tracking.artifacts", "tracking.experiment",
             "tracking.sweep", "tracking.parent_run", "cache.toy_dir"}


def bad_values(tp, rule) -> list:
    """(value as typed on the command line, text the error must show) of each way to break ``rule``."""
    if "choices" in rule and "items" not in rule:
        out = [("no_such_option", "no_such_option")]
        return out + ([("-1", "-1"), ("inf", "inf")] if rule.get("or_number") else [])
    if "pattern" in rule:
        return [("bad-value", "bad-value")]
    out = []
    if "min" in rule:
        out.append((str(rule["min"] - 1), str(rule["min"] - 1)))
    if "max" in rule:
        out.append((str(rule["max"] + 1), str(rule["max"] + 1)))
    for key in ("gt", "lt"):
        if key in rule:
            out.append((str(rule[key]), str(rule[key])))
    if rule.get("finite"):
        out.append(("inf", "inf"))
    return out


def schema_cases(schema, exempt=(), needs=None) -> list:
    """(overrides, texts the one error line must contain) for every constrained field of ``schema``."""
    cases = []
    for path, tp, rule in constrained_fields(schema):
        if not rule or path.startswith(exempt):
            continue
        key = path.replace("[0]", ".0")
        pre = [v for prefix, v in (needs or {}).items() if path.startswith(prefix)]
        leaf = path.rsplit(".", 1)[-1]
        origin = typing.get_origin(tp)
        if "keys" in rule:
            cases.append((pre + [f"+{key}.no_such_key=1"], [f"{path}.no_such_key", "valid:"]))
        if "items" in rule:
            items = rule["items"]
            for value, shown in bad_values(None, items) if "choices" not in items else [("no_such_option", "no_such_option")]:
                if origin is list:
                    cases.append((pre + [f"{key}=[{value}]"], [f"{path}[0]", shown]))
                else:  # a dict or a dataclass: its first key
                    first = (dataclasses.fields(tp)[0].name if dataclasses.is_dataclass(tp)
                             else list(rule["keys"]())[0])
                    cases.append((pre + [f"{key}.{first}={value}"], [f"{path}.{first}", shown]))
            continue
        for value, shown in bad_values(tp, rule):
            cases.append((pre + [f"{key}={value}"], [leaf, shown]))
        if tp in (int, float):  # a wrong type: Hydra's own error, in one line
            cases.append((pre + [f"{key}=not_a_number"], [leaf, "not_a_number"]))
    return cases


SCHEMA_CASES = schema_cases(EmergenceConfig, EXEMPT, needs={"screen.ablation": "screen=ablation"})

#: The cases of the issue, and the cross-field checks of ``validate`` (substrings of the one line).
LISTED_CASES = [
    (["+screen.treshold.bos=3"], ["screen.treshold", "thresholds"]),
    (["screen.treshold.bos=3"], ["screen.treshold", "thresholds"]),
    (["screen.thresholds.bos=inf"], ["screen.thresholds.bos=inf"]),
    (["corpus.n_sequences=many"], ["corpus.n_sequences=many", "integer"]),
    (["screen.classes=induction"], ["screen.classes=induction", "list"]),
    (["screen.local_window=1"], ["screen.local_window=1"]),
    (["screen.pr.samples=2"], ["screen.pr.samples=2"]),
    (["model=no_such_model"], ["no_such_model", "toy_neox"]),
    (["hydra/launcher=no_such_launcher"], ["no_such_launcher", "joblib"]),
    (["corpus.kind=["], ["corpus.kind=["]),
    (["screen.ablation.mode=zero"], ["screen.ablation", "screen=ablation"]),
    (["-m", "screen.thresholds.bos=30,inf"], ["screen.thresholds.bos=inf"]),
    # cross-field, in validate (after composition, before any model is loaded or trained)
    (["corpus.segment_length=40"], ["corpus.segment_length=40", "context", "64"]),
    (["corpus.first_token=500"], ["corpus.first_token=500", "0-127"]),
    (["corpus=xu2026", "corpus.fit_to_model=false"], ["corpus.vocab_hi=10000", "fit_to_model"]),
    (["corpus=text_file"], ["corpus=text_file", "corpus.path"]),
    (["corpus=text_file", "corpus.path=/no/such/file.txt"], ["/no/such/file.txt"]),
    (["screen=ablation", "screen.ablation.group=list"], ["screen.ablation.group=list", "heads"]),
    (["screen=ablation", "screen.ablation.group=list", "screen.ablation.heads=[9.0]"], ["9.0", "layers 0-3"]),
    (["screen=ablation", "screen.ablation.heads=[3x]"], ["screen.ablation.heads[0]='3x'", "layer.head"]),
    (["revision=named"], ["revision.name"]),
]


@pytest.fixture
def cli(monkeypatch, capsys, tmp_path):
    """Run ``python -m emergence ARGS`` in this process; returns (exit status, stderr lines). Loading
    a model, training a toy or opening the store fails the test: bad input must stop before."""
    import emergence.job
    from emergence.__main__ import cli as entry

    def work(*args, **kwargs):
        raise AssertionError("work started (model load, toy training or tracking) for bad input")

    for name in ("load", "revision_pipeline", "Tracker"):
        monkeypatch.setattr(emergence.job, name, work)

    def run(*args):
        argv = [*args, f"hydra.run.dir={tmp_path}/run", f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
                f"cache.toy_dir={tmp_path}/toy"]
        if "-m" in args:
            argv.append(f"hydra.sweep.dir={tmp_path}/sweep")
        monkeypatch.setattr(sys, "argv", ["emergence", *argv])
        capsys.readouterr()
        with pytest.raises(SystemExit) as info:
            entry()
        err = capsys.readouterr().err
        assert not (tmp_path / "toy").exists() and not (tmp_path / "mlflow.db").exists()
        return info.value.code, [line for line in err.splitlines() if line.strip()]

    return run


@pytest.mark.parametrize("overrides, shows", SCHEMA_CASES + LISTED_CASES,
                         ids=[" ".join(o) for o, _ in SCHEMA_CASES + LISTED_CASES])
def test_bad_value_is_one_line_and_exit_2(cli, overrides, shows):
    code, lines = cli(*overrides)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    for text in shows:
        assert text in lines[0], (text, lines[0])


def test_every_number_and_choice_has_a_constraint():
    """A field that takes a number, or a string that is not free text, declares its constraint."""
    free = []
    for path, tp, rule in constrained_fields(EmergenceConfig):
        if path.startswith(EXEMPT) or dataclasses.is_dataclass(tp) or tp is bool or path == "meta":
            continue
        if path in FREE_TEXT:
            assert not rule, f"{path} is listed as free text but has a constraint"
            continue
        if not rule:
            free.append(path)
    assert free == [], f"fields without a constraint (add one in emergence/config.py): {free}"
    assert len(SCHEMA_CASES) > 40


def test_device_without_cuda_is_refused_before_loading(cli):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, lines = cli("device=cuda")
    assert code == 2 and lines == ["error: device=cuda is not available on this machine; valid here: auto, cpu"
                                   + (", mps" if torch.backends.mps.is_available() else "")]


def test_help_cfg_and_a_good_sweep_value_still_work(monkeypatch, capsys):
    from emergence.__main__ import cli as entry

    monkeypatch.setattr(sys, "argv", ["emergence", "--cfg", "job", "screen.local_window=3"])
    entry()
    assert "local_window: 3" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["emergence", "--help"])
    with pytest.raises(SystemExit) as info:
        entry()
    assert info.value.code == 0
    from emergence.validation import command_overrides, sweep_variants

    assert command_overrides(["-m", "--cfg", "job", "a=1,2", "hydra/launcher=joblib"]) == (["a=1,2", "hydra/launcher=joblib"], True)
    assert sweep_variants(["a=1,2", "b=x", "c=3,4"]) == [["a=1", "b=x", "c=3"], ["a=2", "b=x", "c=3"], ["a=1", "b=x", "c=4"]]


def test_a_truncated_weights_file_and_a_broken_tokenizer_are_one_line(tmp_path):
    from tiny_models import save_revisions

    from emergence import EmergenceError
    from emergence.loading import load
    from emergence.registry import compose
    from emergence.revisions import Revision

    folder = save_revisions(tmp_path / "tiny", "gpt_neox", steps=(10,))
    cfg = compose(["model=pythia_70m", f"model.path={folder}", "model.repo=null", "model.revisions=folder"])
    weights = folder / "step10" / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[: len(good) // 2])
    with pytest.raises(EmergenceError, match="model.safetensors is truncated or corrupt.*download it again"):
        load(cfg.model, Revision(10000, 10, "step10"), device="cpu", folder=str(folder / "step10"))
    weights.write_bytes(good)
    (folder / "step10" / "tokenizer.json").write_text("{not json")
    with pytest.raises(EmergenceError, match="cannot load the tokenizer"):
        load(cfg.model, Revision(10000, 10, "step10"), device="cpu", folder=str(folder / "step10"))


def test_end_to_end_exit_status_and_one_stderr_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "emergence", "+screen.treshold.bos=3", f"hydra.run.dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    from emergence.config import ScreenConfig

    valid = ", ".join(f.name for f in dataclasses.fields(ScreenConfig))
    assert proc.stderr.strip().splitlines() == [f"error: screen.treshold is not a key of screen; valid: {valid}"]


def test_a_bad_group_option_file_is_one_line_naming_the_file_and_key(tmp_path):
    import shutil

    from emergence import EmergenceError
    from emergence.registry import CONF_DIR
    from emergence.validation import precheck

    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "screen" / "typed.yaml").write_text("name: typed\nlocal_window: wide\n")
    (conf / "model" / "broken.yaml").write_text("name: broken\nrepo: org/broken\nfamily: gpt_neox\nrevisons: pythia\n")
    (conf / "model" / "alien.yaml").write_text("name: alien\nrepo: org/alien\nfamily: rwkv\nrevisions: pythia\n")
    expected = {"screen=typed": "screen.local_window=wide (in screen/typed.yaml) must be an integer",
                "model=broken": "model.revisons is not a key of model (in model/broken.yaml); valid: name, repo",
                "model=alien": "model.family='rwkv' is unknown; valid: "}
    for override, message in expected.items():
        with pytest.raises(EmergenceError) as info:
            precheck([override], str(conf), "config", EmergenceConfig, EmergenceError)
        assert str(info.value).startswith(message) and "\n" not in str(info.value)
