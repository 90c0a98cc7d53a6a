"""`python -m emergence --help` and `python -m stats --help` list the groups and the registries."""

import commands
import sys
from pathlib import Path

import emergence.config as config
from emergence.catalog import GROUPS, group_options

ROOT = Path(__file__).resolve().parents[2]


def help_of(app: str, tmp_path) -> str:
    proc = commands.run([sys.executable, "-m", app, "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_emergence_help_lists_groups_models_classes_families_and_sources(tmp_path):
    text = help_of("emergence", tmp_path)
    for group in GROUPS:
        assert f"  {group}: " in text, group
        for option in group_options(group):
            assert option in text, (group, option)
    assert "toy_neox*" in text and "logspaced*" in text  # the defaults are marked
    assert "pythia_1b " in text and "EleutherAI/pythia-1b" in text and "allenai/OLMo-1B-0724-hf" in text
    assert "= olmo_1b_0724" in text and "= pythia_1b" in text  # a short name says what it points at
    for name in (*config.HEAD_CLASSES, *config.FAMILIES):
        assert name in text, name
    assert all(c in text.split("== Head classes")[1] for c in
               ("induction", "previous_token", "duplicate_token", "bos", "self", "local"))
    for source in getattr(config, "MODEL_SOURCES", ()):
        assert str(source) in text, source
    assert "recipe@model.recipe=" in text
    assert f"{tmp_path.resolve()}/outputs" in text  # outputs go to ./outputs of where it runs


def test_stats_help_lists_sources_and_classes(tmp_path):
    text = help_of("stats", tmp_path)
    for source in sorted(p.stem for p in (ROOT / "conf" / "source").glob("*.yaml")):
        assert source in text, source
    for kind in ("mlflow", "csv", "heads_csv"):
        assert kind in text
    for cls in ("induction (50x)", "previous_token", "duplicate_token", "bos (30x)", "self", "local (10x)"):
        assert cls in text, cls
    assert f"{tmp_path.resolve()}/outputs/stats" in text


def test_help_text_escapes_no_dollar_for_hydra():
    from emergence.help import registries_text

    assert "$EMERGENCE_HOME" in registries_text()  # printed as written: the resolver doubles it for Hydra
