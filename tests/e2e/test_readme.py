"""Every command of the README and the documentation site is run here or is a documented check
(docs/checks.md); the README stays a short front page; the site builds without a warning.

The commands are the lines of the ``bash`` blocks of ``README.md`` and ``docs/*.md``
(continuations joined, comments dropped). Three levels:

- ``RUN``: cheap and offline; run as written (``python`` is this venv's), from a
  temporary folder with ``EMERGENCE_HOME`` there, a few with settings that make them
  quick (``CHEAPER``); their output is checked.
- every other ``python -m emergence`` / ``python -m stats`` command is composed here
  exactly as the shell would pass it (``shlex``), through Hydra's override parser, the
  command-line checks and the schema: a command that fails as written (a bad group
  option, a misquoted value, an unknown key) fails this test. Its real run (GPU, hub,
  minutes) is a documented check.
- every command not in ``RUN`` must appear, as written, in ``docs/checks.md``, which
  says what it needs, what it printed and when it was last run (or which test runs it).
"""

from __future__ import annotations

import os
import re
import shlex
import commands
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CHECKS = ROOT / "docs" / "checks.md"
#: The pages whose commands count: the README and the site's pages (docs/checks.md lists the checks).
PAGES = [README] + sorted(p for p in (ROOT / "docs").rglob("*.md") if p != CHECKS)
#: The page holding the reproduction table of the study's findings.
REPRODUCTION = ROOT / "docs" / "reproduction.md"

#: Run as written (with CHEAPER's settings added); the regex its output must match.
RUN = {
    "python -m emergence --help": r"== Registered models",
    "python -m stats --help": r"xu2026",
    "python -m emergence -m model=pythia_1b,olmo_1b_0724,olmoe_1b_7b_0924 revision=logspaced dry_run=true":
        r"dry run: 30 job\(s\)",
    "python -m emergence model=pythia_1b revision=logspaced dry_run=true": r"dry run: 10 job\(s\)",
    "python -m emergence -m model=polypythia model.size=160m model.seed=1,2,3 revision=logspaced dry_run=true":
        r"EleutherAI/pythia-160m-seed3(.|\n)*dry run: 30 job\(s\)",
    "python -m stats source=xu2026": r"stats: 12 curves",
    "python -m stats source=xu2026 analysis.thresholds.bos=50 analysis.thresholds.induction=100": r"stats: 12 curves",
}
#: Settings that make a RUN command quick (the same analysis with fewer replicates, no figures).
CHEAPER = {
    "python -m stats source=xu2026": ["analysis.n_boot=20", "analysis.sensitivity.n_boot=10",
                                      "analysis.shape.n_perm=99", "analysis.findings.n_perm=99",
                                      "analysis.progress=false", "figures.enabled=false", "tracking.log=false"],
}


def readme_commands(text: str):
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            line = re.split(r"\s{2,}#\s", line)[0].strip()  # a trailing comment
            out.append(re.sub(r"\s+", " ", line))
    return out


COMMANDS = [c for page in PAGES for c in readme_commands(page.read_text())]


def python_command(command: str):
    """(app, arguments) of a `python -m emergence|stats ...` command, else None."""
    words = shlex.split(command)
    if len(words) >= 3 and words[0] in ("python", ".venv/bin/python") and words[1] == "-m" \
            and words[2] in ("emergence", "stats"):
        return words[2], words[3:]
    return None


def test_the_pages_have_commands_and_no_reference_outside_the_repository():
    assert len(COMMANDS) > 20
    for page in PAGES:
        text = page.read_text()
        assert "../shared" not in text and "shared/reference" not in text, page
        for target in re.findall(r"\]\(([^)#]+)\)", text):
            if not re.match(r"https?://", target):
                assert (page.parent / target).resolve().is_relative_to(ROOT), f"{page.name} links {target}, outside"
                assert (page.parent / target).exists(), f"{page.name} links {target}, which is not in the repository"


def test_the_readme_is_a_short_front_page():
    """At most 200 lines (what it is, install, the quick start, next commands, outputs, links); the
    manual is the site's. No issue numbers and no dated tables: those belong to the notes and the
    benchmarks page."""
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert not re.search(r"\bissues? \d+|#\d+\b", text, re.I)
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)
    for command in ("bash scripts/setup.sh && .venv/bin/python -m emergence",
                    'bash scripts/setup.sh && .venv/bin/python -m pytest -m "not slow" -n 2'):
        assert command in readme_commands(text)


def test_the_documentation_site_builds_strict(tmp_path):
    """`mkdocs build --strict` (mkdocs.yml: Material, mkdocstrings' API reference): a broken link,
    a page missing from the navigation or an API path that does not import fails the build."""
    proc = commands.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "statistics" / "index.html").exists()
    assert "grid_bounds" in (tmp_path / "site" / "api" / "stats" / "index.html").read_text()


def test_every_command_is_run_here_or_a_documented_check():
    documented = {re.sub(r"\s+", " ", c) for c in readme_commands(CHECKS.read_text())}
    missing = [c for c in COMMANDS if c not in RUN and c not in documented]
    assert not missing, "Documented commands neither run by tests/e2e/test_readme.py nor listed in docs/checks.md:\n" + \
        "\n".join(missing)
    assert all(c in COMMANDS for c in RUN), [c for c in RUN if c not in COMMANDS]


def compose(app: str, args):
    """Compose a command's config as its app would, without running it (first job of a sweep)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    argv, args = list(args), [a for a in args if a not in ("-m", "--multirun")]
    parsed = OverridesParser.create().parse_overrides(args)
    first = BasicSweeper.split_arguments(parsed, max_batch_size=None)[0][0]
    GlobalHydra.instance().clear()
    if app == "emergence":
        import emergence
        import emergence.__main__ as cli

        getattr(cli, "precheck", cli.check_command_line)(argv)  # the app's own checks, before Hydra
        with initialize_config_dir(config_dir=str(emergence.CONF_DIR), version_base="1.3"):
            cfg = hydra_compose("config", overrides=first, return_hydra_config=True)
    else:
        import stats
        from stats.config import register_configs

        register_configs()
        if not any(a.startswith("output_dir=") for a in first):
            first = [*first, "output_dir=/tmp/readme-check"]
        with initialize_config_dir(config_dir=str(stats.CONF_DIR), version_base=None):
            cfg = hydra_compose("stats", overrides=first)
        OmegaConf.to_object(cfg)  # the schema, as `python -m stats` does
    return cfg


#: Commands naming the reader's own config folder (docs/running-studies.md "Adding a model"): tests/e2e/test_install.py runs them
#: as written with that folder made (docs/checks.md), so they are not composed here.
OWN_FOLDER = "--config-dir myconf"


@pytest.mark.parametrize("command", [c for c in COMMANDS if python_command(c) and c not in RUN
                                     and OWN_FOLDER not in c])
def test_each_command_composes_as_written(command, tmp_path, monkeypatch):
    monkeypatch.setenv("EMERGENCE_HOME", str(tmp_path))
    app, args = python_command(command)
    cfg = compose(app, args)
    if "source.filter=" in command:
        assert cfg.source.filter == "params.model = 'pythia_1b'"


@pytest.mark.parametrize("command", list(RUN))
def test_cheap_commands_run_as_written(command, tmp_path):
    app, args = python_command(command)
    extra = next((v for k, v in CHEAPER.items() if command.startswith(k)), [])
    env = dict(os.environ, EMERGENCE_HOME=str(tmp_path), HF_HUB_OFFLINE="1")
    proc = commands.run([sys.executable, "-m", app, *args, *extra], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(RUN[command], proc.stdout), proc.stdout[-3000:]
    if command == "python -m stats source=xu2026":
        report = Path(proc.stdout.strip().splitlines()[-1].split("report: ")[1].split(";")[0]).read_text()
        check_reproduction_table(report)


def check_reproduction_table(report: str):
    """The reproduction table (docs/reproduction.md) is the one the command prints: every row verbatim,
    except the fitted gaps, whose bootstrap intervals and p-values depend on the number of
    replicates (the page quotes the full run's: docs/checks.md)."""
    rows = [line for line in REPRODUCTION.read_text().splitlines() if line.startswith("| F")]
    assert len(rows) >= 30
    for row in rows:
        tool = row.split(" | ")[4]
        if "[" in tool or "p = " in tool:  # a bootstrap interval or p-value
            assert row.split(" | ")[:4] == next(r for r in report.splitlines() if r.startswith(" | ".join(
                row.split(" | ")[:4]))).split(" | ")[:4]
            continue
        assert row in report, f"docs/reproduction.md row not printed by `python -m stats source=xu2026`:\n{row}"


@pytest.mark.slow
def test_the_full_xu2026_command_prints_the_readme_table_and_figures(tmp_path):
    """`python -m stats source=xu2026` as written (1000 replicates; about a minute): every row of
    the reproduction table of docs/reproduction.md, bootstrap figures included, and the verdicts it quotes."""
    env = dict(os.environ, EMERGENCE_HOME=str(tmp_path))
    proc = commands.run([sys.executable, "-m", "stats", "source=xu2026", "figures.enabled=false", "tracking.log=false"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = Path(proc.stdout.strip().splitlines()[-1].split("report: ")[1].split(";")[0]).read_text()
    rows = [line for line in REPRODUCTION.read_text().splitlines() if line.startswith("| F")]
    missing = [row for row in rows if row not in report]
    assert not missing, "\n".join(missing)
    for quoted in ("olmo_1b_0724 / bos: sharp - sharp: 10-90 width <= 0.43 decades <= 0.5",
                   "pythia_1b / bos: gradual - gradual: 10-90 width >= 0.79 decades > 0.5",
                   "refine between step512 and step3000", "p = 0.000999"):
        assert quoted in report, quoted

