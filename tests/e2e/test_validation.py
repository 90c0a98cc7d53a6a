"""Validation before work (issue 12, point 3): every value a user can set is checked against
its schema's constraints (emergence/config.py, walked by emergence/common/checks.py), and the
cross-field checks run in ``emergence.preflight.validate``, before any model is loaded or trained:
exit status 2 and one stderr line naming the value and the valid choices.

The bad values are derived from the schema itself, so a new field with a constraint is
tested without a new line here. Most cases call the CLI in this process (a subprocess costs
seconds); two real subprocesses prove the exit status and the one-line stderr end to end."""

from __future__ import annotations

import dataclasses
import os
import sys
import typing
from pathlib import Path

import pytest

from emergence.config import EmergenceConfig
from emergence.common.checks import constrained_fields
import commands

ROOT = Path(__file__).resolve().parents[2]
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


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CLOSED_PORT = closed_port()


def case_id(overrides) -> str:
    """A case's test id, the same in every process of a parallel run (the closed port is not)."""
    return " ".join(overrides).replace(f":{CLOSED_PORT}", ":CLOSED_PORT")

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
    # the store (issue 23, point 5): its scheme and whether it answers, before any work, dry runs too
    (["tracking.uri=garbage:///"], ["tracking.uri='garbage:///' has an unknown scheme 'garbage'", "sqlite:///"]),
    (["tracking.uri=garbage:///", "dry_run=true"], ["tracking.uri='garbage:///' has an unknown scheme"]),
    (["tracking.uri=sqlite://mlflow.db"], ["tracking.uri='sqlite://mlflow.db'", "three slashes"]),
    ([f"tracking.uri=http://127.0.0.1:{CLOSED_PORT}"], [f"http://127.0.0.1:{CLOSED_PORT}' cannot be reached",
                                                         "Connection refused"]),
    ([f"tracking.uri=http://127.0.0.1:{CLOSED_PORT}", "dry_run=true"], ["cannot be reached"]),
    (["-m", "screen=bos,induction", "tracking.uri=garbage:///"], ["unknown scheme 'garbage'"]),
    ([f"tracking.uri=postgresql://user:secret@127.0.0.1:{CLOSED_PORT}/mlflow"], [":***@127.0.0.1", "cannot be reached"]),
    (["tracking.uri=sqlite:////etc/hostname/mlflow.db"], ["'/etc/hostname' is a file, not a folder"]),
    (["model.path=/tmp/Müller/x"], ["token recognition error", "quote the value for Hydra: 'model.path=\"/tmp/Müller/x\"'"]),
    # issue 34, point 3: mapping keys, empty names, sizes, the heartbeat rule
    (["screen.thresholds.induktion=40"], ["screen.thresholds.induktion is not a key of screen.thresholds",
                                          "valid: induction, previous_token"]),
    (["+screen.thresholds.induktion=40"], ["screen.thresholds.induktion is not a key", "valid: induction"]),
    (["tracking.experiment="], ["tracking.experiment='' is empty"]),
    (["tracking.heartbeat_s=700", "tracking.stale_after_s=600"], ["tracking.stale_after_s=600.0 must exceed "
                                                                  "tracking.heartbeat_s=700.0"]),
    (["corpus.n_sequences=99999999999999999999"], ["corpus.n_sequences=99999999999999999999", "<= 1000000"]),
    (["corpus.n_sequences=900000", "corpus.segment_length=5000"], ["corpus.n_sequences=900000 makes a probe of",
                                                                   "set corpus.n_sequences <="]),
]


@pytest.fixture
def cli(monkeypatch, capsys, tmp_path):
    """Run ``python -m emergence ARGS`` in this process; returns (exit status, stderr lines). Loading
    a model, training a toy or opening the store fails the test: bad input must stop before."""
    import emergence.refine_rounds
    import emergence.screening
    from emergence.__main__ import cli as entry

    def work(*args, **kwargs):
        raise AssertionError("work started (model load, toy training or tracking) for bad input")

    for module, name in ((emergence.screening, "load"), (emergence.screening, "revision_pipeline"),
                         (emergence.screening, "Tracker"), (emergence.refine_rounds, "Tracker")):
        monkeypatch.setattr(module, name, work)

    def run(*args):
        given = {a.split("=", 1)[0] for a in args}
        argv = [*args, f"hydra.run.dir={tmp_path}/run", f"cache.toy_dir={tmp_path}/toy"]
        if "tracking.uri" not in given:
            argv.append(f"tracking.uri=sqlite:///{tmp_path}/mlflow.db")
        if "-m" in args:
            argv.append(f"hydra.sweep.dir={tmp_path}/sweep")
        monkeypatch.setattr(sys, "argv", ["emergence", *argv])
        capsys.readouterr()
        with pytest.raises(SystemExit) as info:
            entry()
        err = capsys.readouterr().err
        assert not (tmp_path / "toy").exists() and not (tmp_path / "mlflow.db").exists()
        # Nothing written for refused input: no store, no Hydra log or run folder, no sweep folder.
        assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()
        return info.value.code, [line for line in err.splitlines() if line.strip()]

    return run


@pytest.mark.parametrize("overrides, shows", SCHEMA_CASES + LISTED_CASES,
                         ids=[case_id(o) for o, _ in SCHEMA_CASES + LISTED_CASES])
def test_bad_value_is_one_line_and_exit_2(cli, overrides, shows):
    code, lines = cli(*overrides)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    for text in shows:
        assert text in lines[0], (text, lines[0])


@pytest.mark.parametrize("content, shows", [(b"", "is empty"), (b"  \n\n", "is empty"),
                                            (b"PK\x03\x04\x00\x00binary" * 50, "binary file, not text"),
                                            (b"caf\xe9 latin-1 text " * 50, "is not UTF-8 text")],
                         ids=["empty", "blank", "binary", "latin1"])
def test_a_text_corpus_that_is_not_text_is_refused_before_any_model_loads(cli, tmp_path, content, shows):
    """Issue 34, point 3: an empty or binary corpus.path used to be found only after the model loaded."""
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    code, lines = cli("corpus=text_file", f"corpus.path={path}")
    assert code == 2 and len(lines) == 1, lines
    assert str(path) in lines[0] and shows in lines[0], lines[0]


#: Malformed ``revisions.json`` files (issue 23, points 2-3): (contents, texts the one line shows).
REVISION_FILE_CASES = [
    ('{"revisions": [{"name": "../outside", "step": 1, "tokens": 1000}]}', ["entry 0", "'../outside' is not a plain name"]),
    ('{"revisions": [{"name": "/etc", "step": 1, "tokens": 1000}]}', ["entry 0", "'/etc' is not a plain name"]),
    ('{"revisions": [{"name": "step10", "step": 10, "tokens": 10000}, {"name": "a/../../b", "step": 2, "tokens": 5}]}',
     ["entry 1", "'a/../../b' is not a plain name"]),
    ('{"revisions": [', ["is not valid JSON", "line 1 column"]),
    ('{"revisions": {"step10": 1}}', ['has no "revisions" list']),
    ('["step10"]', ['has no "revisions" list']),
    ('{"revisions": []}', ["lists no revisions"]),
    ('{"revisions": ["step10"]}', ["entry 0", "not an object"]),
    ('{"revisions": [{"name": "step10", "step": 10}]}', ["entry 0", "missing tokens"]),
    ('{"revisions": [{"name": "step10", "step": 10, "tokens": "many"}]}', ["entry 0", "tokens='many' is not a non-negative"]),
    ('{"revisions": [{"name": "step10", "step": 10, "tokens": -5}]}', ["entry 0", "tokens=-5 is not a non-negative"]),
    ('{"revisions": [{"name": "step10", "step": 1.5, "tokens": 5}]}', ["entry 0", "step=1.5 is not a non-negative"]),
    ('{"revisions": [{"name": "step10", "step": 10, "tokens": true}]}', ["entry 0", "tokens=True is not"]),
    ('{"revisions": [{"name": "step10", "step": 10, "tokens": 5}, {"name": "step10", "step": 20, "tokens": 9}]}',
     ["entry 1", "'step10' is listed twice (entries 0 and 1)"]),
]


@pytest.fixture(scope="module")
def one_checkpoint(tmp_path_factory):
    from tiny_models import save_revisions

    return save_revisions(tmp_path_factory.mktemp("rev_ckpt"), "gpt_neox", steps=(10,)) / "step10"


REVISION_FILE_RUNS = [(c, shows, False) for c, shows in REVISION_FILE_CASES] + \
    [(c, shows, True) for c, shows in REVISION_FILE_CASES[:1] + REVISION_FILE_CASES[3:4] + REVISION_FILE_CASES[-1:]]


@pytest.mark.parametrize("contents, shows, multirun", REVISION_FILE_RUNS,
                         ids=[("-m " if m else "") + c for c, _, m in REVISION_FILE_RUNS])
def test_a_bad_revisions_json_is_one_line_and_exit_2(cli, tmp_path, one_checkpoint, contents, shows, multirun):
    """A revision name is a plain name inside model.path: ``../x`` or an absolute path would load
    and screen a folder outside it. Every malformed file is one line naming the file and the entry,
    before any model is loaded (the fixture fails the test otherwise)."""
    import shutil

    models = tmp_path / "models"
    shutil.copytree(one_checkpoint, models / "step10")
    shutil.copytree(one_checkpoint, tmp_path / "outside")  # what ../outside would reach
    (models / "revisions.json").write_text(contents)
    args = ["model=pythia_70m", "model.name=tiny", f"model.path={models}", "model.repo=null", "model.revisions=folder",
            "revision=all", "stats=false"]
    code, lines = cli(*(["-m"] if multirun else []), *args)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: revision file '{models / 'revisions.json'}'"), lines[0]
    for text in shows:
        assert text in lines[0], (text, lines[0])


def test_an_unreachable_server_is_refused_within_the_timeout(cli):
    """A server that accepts the connection and never answers (the worst case: 254 s of MLflow's
    retries, then 118 lines): refused after tracking.connect_timeout_s, in one line."""
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nothing ever answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        tic = time.perf_counter()
        code, lines = cli(f"tracking.uri={url}", "tracking.connect_timeout_s=1")
        took = time.perf_counter() - tic
    assert code == 2 and lines == [f"error: tracking.uri='{url}' cannot be reached (no answer within 1 s); start the "
                                   "server, check the address or raise tracking.connect_timeout_s"], lines
    assert took < 20


def test_a_read_only_store_folder_is_one_line_before_any_work(cli, tmp_path):
    """A study folder one cannot write in (48 lines of traceback before): refused before anything
    is loaded, naming the folder and the cause; the store in it is left as it was."""
    from emergence.common.store import prepare_store

    folder = tmp_path / "study"
    prepare_store(f"sqlite:///{folder}/mlflow.db", "emergence")
    before = (folder / "mlflow.db").read_bytes()
    ro = read_only_folder(folder)
    try:
        code, lines = cli(f"tracking.uri=sqlite:///{folder}/mlflow.db")
        code_dry, lines_dry = cli(f"tracking.uri=sqlite:///{folder}/mlflow.db", "dry_run=true")
    finally:
        ro()
    assert code == code_dry == 2 and len(lines) == 1 and lines == lines_dry, lines
    assert lines[0].startswith(f"error: tracking.uri='sqlite:///{folder}/mlflow.db': cannot write in the store folder "
                               f"'{folder}'"), lines[0]
    assert "Operation not permitted" in lines[0] or "Permission denied" in lines[0]
    assert (folder / "mlflow.db").read_bytes() == before


def test_refused_input_leaves_no_outputs_folder(monkeypatch, capsys, tmp_path):
    """Input refused inside the app (here a revision the model does not have, found once the
    registry is read) used to leave Hydra's log in ./outputs/hydra/<date>/<time>/: nothing now."""
    from emergence.__main__ import cli as entry

    monkeypatch.setenv("EMERGENCE_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["emergence", "model=pythia_70m", "revision=named", "revision.name=step7"])
    with pytest.raises(SystemExit) as info:
        entry()
    assert info.value.code == 2 and "unknown revision 'step7'" in capsys.readouterr().err
    assert not (tmp_path / "outputs").exists()


def read_only_folder(folder):
    """Make ``folder`` read-only for whoever runs the test (immutable for root, mode 0555 for
    another user); returns the function that undoes it. Skips where neither can be done."""
    if os.geteuid() == 0:
        if commands.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("root without chattr +i: no folder is read-only for this user")
        return lambda: commands.run(["chattr", "-i", str(folder)], capture_output=True)
    folder.chmod(0o555)
    return lambda: folder.chmod(0o755)


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
    from emergence.common.checks import command_overrides, sweep_variants

    assert command_overrides(["-m", "--cfg", "job", "a=1,2", "hydra/launcher=joblib"]) == (["a=1,2", "hydra/launcher=joblib"], True)
    assert sweep_variants(["a=1,2", "b=x", "c=3,4"]) == [["a=1", "b=x", "c=3"], ["a=2", "b=x", "c=3"], ["a=1", "b=x", "c=4"]]


def test_a_truncated_weights_file_and_a_broken_tokenizer_are_one_line(tmp_path):
    from tiny_models import save_revisions

    from emergence import EmergenceError
    from emergence.loading import load
    from emergence.catalog import compose
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


def test_a_truncated_weights_file_whose_reader_says_nothing_is_still_one_line(tmp_path, monkeypatch):
    """A weights reader's error may carry no message: the line names the error's type instead."""
    import transformers
    from tiny_models import save_revisions

    from emergence import EmergenceError
    from emergence.loading import load
    from emergence.catalog import compose
    from emergence.revisions import Revision

    folder = save_revisions(tmp_path / "tiny", "gpt_neox", steps=(10,))
    cfg = compose(["model=pythia_70m", f"model.path={folder}", "model.repo=null", "model.revisions=folder"])
    weights = folder / "step10" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])

    def silent(*args, **kwargs):
        raise RuntimeError()

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", silent)
    with pytest.raises(EmergenceError, match=r"model.safetensors is truncated or corrupt \(RuntimeError\)"):
        load(cfg.model, Revision(10000, 10, "step10"), device="cpu", folder=str(folder / "step10"))


def test_end_to_end_exit_status_and_one_stderr_line(tmp_path):
    proc = commands.run([sys.executable, "-m", "emergence", "+screen.treshold.bos=3", f"hydra.run.dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    from emergence.config import ScreenConfig

    valid = ", ".join(f.name for f in dataclasses.fields(ScreenConfig))
    assert proc.stderr.strip().splitlines() == [f"error: screen.treshold is not a key of screen; valid: {valid}"]


def test_a_bad_group_option_file_is_one_line_naming_the_file_and_key(tmp_path):
    import shutil

    from emergence import EmergenceError
    from emergence.catalog import CONF_DIR
    from emergence.common.checks import precheck

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
