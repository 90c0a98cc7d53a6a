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

ROOT = Path(__file__).resolve().parents[1]
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
    out = run(python, "-c", "import json, emergence, stats, emergence.registry as r, hydra_plugins.emergence_sweeper as s; "
              "print(json.dumps([emergence.__file__, str(emergence.CONF_DIR), str(stats.CONF_DIR), s.__file__, "
              "r.group_options('model')]))", cwd=work, env=env)
    emergence_file, conf, stats_conf, sweeper, models = json.loads(out)
    for path in (emergence_file, conf, stats_conf, sweeper):
        assert Path(path).resolve().is_relative_to(purelib.resolve()), path
    assert (Path(conf) / "config.yaml").is_file() and (Path(stats_conf) / "stats.yaml").is_file()
    from emergence.registry import group_options

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
    assert (work / "outputs" / "mlflow.db").is_file()

    home = tmp_path / "home"
    out = run(python, "-m", "stats", *quick, "tracking.log=false", cwd=work, env=dict(env, EMERGENCE_HOME=str(home)))
    report = Path(out.strip().splitlines()[-1].split("report: ")[1].split(";")[0])
    assert report.resolve().is_relative_to((home / "outputs" / "stats").resolve())
