"""A non-editable install in a fresh virtual environment runs from any folder.

The checkout is copied to a temporary folder and installed with ``pip install
--no-deps --no-build-isolation --no-index`` (a wheel build: ``setup.py`` copies
``conf/`` into the packages) into a new venv. The heavy dependencies are not
downloaded: a ``.pth`` file puts this venv's ``site-packages`` at the end of the new
venv's path as a plain path line, so its own ``.pth`` files (the editable finder of the
checkout) are not run and the installed copy of ``emergence`` and ``stats`` wins; the
test checks that. Then, from a folder outside the checkout: ``--help`` of both apps, a
dry run, the composed output paths, and a small real ``python -m stats source=xu2026``
whose outputs land in that folder's ``./outputs`` (and in ``$EMERGENCE_HOME/outputs``
when that is set).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".git", ".venv", "outputs", "build", "dist", "*.egg-info", "__pycache__",
                              ".pytest_cache", ".ruff_cache", "multirun", "mlruns", "mlartifacts", "*.db")


def run(python, *args, cwd, env=None, timeout=300):
    proc = subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of the new venv, a working folder outside the checkout, the environment)."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=SKIP)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EMERGENCE_HOME", "PYTHONHOME")}
    env.update(HF_HUB_OFFLINE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1")
    work = tmp / "work"
    work.mkdir()
    run(python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", str(src), cwd=work, env=env)
    return python, work, env, Path(purelib)


def test_the_installed_copy_is_imported_and_carries_its_config_tree(installed):
    python, work, env, purelib = installed
    out = run(python, "-c", "import json, emergence, stats, emergence.catalog as r, hydra_plugins.emergence_sweeper as s; "
              "print(json.dumps([emergence.__file__, str(emergence.CONF_DIR), str(stats.CONF_DIR), s.__file__, "
              "r.group_options('model')]))", cwd=work, env=env)
    emergence_file, conf, stats_conf, sweeper, models = json.loads(out)
    for path in (emergence_file, conf, stats_conf, sweeper):
        assert Path(path).resolve().is_relative_to(purelib.resolve()), path
    assert (Path(conf) / "config.yaml").is_file() and (Path(stats_conf) / "stats.yaml").is_file()
    from emergence.catalog import group_options

    assert models == group_options("model")  # the checkout's registry


def test_help_and_dry_run_from_any_folder(installed):
    python, work, env, _ = installed
    text = run(python, "-m", "emergence", "--help", cwd=work, env=env)
    assert "pythia_1b" in text and "toy_neox" in text and "induction" in text and "gpt_neox" in text
    assert "source" in run(python, "-m", "stats", "--help", cwd=work, env=env)
    plugins = run(python, "-m", "emergence", "--hydra-help", cwd=work, env=env)
    assert "hydra/sweeper: basic, revisions" in plugins and "joblib" in plugins  # the installed sweeper plugin
    plan = run(python, "-m", "emergence", "dry_run=true", cwd=work, env=env)
    assert "toy_neox" in plan and "dry run: 10 job(s)" in plan, plan
    cfg = run(python, "-m", "emergence", "--cfg", "job", "--resolve", cwd=work, env=env)
    assert f"toy_dir: {work.resolve()}/outputs/toy" in cfg
    assert f"sqlite:///{work.resolve()}/outputs/mlflow.db" in cfg
    assert [p.name for p in (work / "outputs").iterdir()] == ["hydra"]  # the dry run's Hydra log folder, here


def test_stats_on_the_bundled_data_writes_to_the_working_folder_or_emergence_home(installed, tmp_path):
    python, work, env, _ = installed
    quick = ["source=xu2026", "analysis.n_boot=20", "analysis.sensitivity.n_boot=10", "analysis.shape.n_perm=99",
             "analysis.findings.n_perm=99", "analysis.progress=false", "figures.enabled=false"]
    out = run(python, "-m", "stats", *quick, cwd=work, env=env)
    report = Path(out.strip().splitlines()[-1].split("report: ")[1].split(";")[0])
    assert report.is_file() and report.resolve().is_relative_to((work / "outputs" / "stats").resolve())
    assert not (work / "outputs" / "mlflow.db").exists()  # a file analysis writes no store unless asked (issue 34)

    home = tmp_path / "home"
    out = run(python, "-m", "stats", *quick, "tracking.log=false", cwd=work, env=dict(env, EMERGENCE_HOME=str(home)))
    report = Path(out.strip().splitlines()[-1].split("report: ")[1].split(";")[0])
    assert report.resolve().is_relative_to((home / "outputs" / "stats").resolve())


# --- the guide's "Adding a model" (docs/running-studies.md), as written, from another folder -------

def readme_adding_a_model():
    """(the YAML of myconf/model/my_run.yaml, the commands of the bash block after it), from the guide."""
    import re

    text = (ROOT / "docs" / "running-studies.md").read_text()
    section = text[text.index("## Adding a model"):text.index("## Revisions")]
    yaml_text = re.search(r"```yaml\n# myconf/model/my_run.yaml\n(.*?)```", section, re.S)[1]
    block = re.search(r"```bash\n(.*?)```", section[section.index("myconf/model/my_run.yaml"):], re.S)[1]
    return yaml_text, [line.strip() for line in block.splitlines() if line.strip()]


def test_readme_adding_a_model_works_as_written_from_another_folder(installed, tmp_path):
    """A tiny GPT-2 checkpoint series added through --config-dir from a folder outside the package
    (the guide's YAML and commands, with its example path replaced by the tiny series): the dry
    run lists it, the screen logs it with the family its config.json names, the family check
    passes; $EMERGENCE_HOME/conf and --help see it too."""
    import sqlite3

    python, work, env, _ = installed
    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_models import save_decoder

    series = save_decoder(tmp_path / "checkpoints", "gpt2")
    yaml_text, commands = readme_adding_a_model()
    assert len(commands) == 3 and all(c.startswith("python -m ") for c in commands), commands
    project = tmp_path / "project"
    (project / "myconf" / "model").mkdir(parents=True)
    (project / "myconf" / "model" / "my_run.yaml").write_text(yaml_text.replace("/data/my_run/checkpoints", str(series)))
    quick = ["corpus.n_sequences=16", "corpus.segment_length=8", "stats=false", "screen=bos"]
    outputs = []
    for command in commands:
        words = command.replace("/data/my_run/checkpoints", str(series)).split()[1:]
        extra = quick if words[:2] == ["-m", "emergence"] and "dry_run=true" not in words else []
        outputs.append(run(python, *words, *extra, cwd=project, env=env))
    plan, screened, checked = outputs
    assert "dry run: 2 job(s)" in plan and plan.count("my_run") == 2, plan
    assert "my_run" in screened, screened
    assert "9 of 9 checks passed" in checked, checked
    db = sqlite3.connect(project / "outputs" / "mlflow.db")
    families = {v for (v,) in db.execute("select value from params where key = 'family'")}
    assert families == {"gpt2"}
    home = tmp_path / "home"
    (home / "conf" / "model").mkdir(parents=True)
    (home / "conf" / "model" / "my_run.yaml").write_text((project / "myconf" / "model" / "my_run.yaml").read_text())
    home_env = dict(env, EMERGENCE_HOME=str(home))
    assert "dry run: 2 job(s)" in run(python, "-m", "emergence", "model=my_run", "revision=all", "dry_run=true",
                                       cwd=tmp_path, env=home_env)
    assert "my_run" in run(python, "-m", "emergence", "--help", cwd=tmp_path, env=home_env)
