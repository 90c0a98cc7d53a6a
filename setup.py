"""Build hook: ship the checkout's top-level ``conf/`` inside the installed packages.

``conf/`` stays the one source of truth in the checkout; a (non-editable) build copies
it to ``emergence/conf`` (the whole tree) and ``stats/conf`` (``stats.yaml`` and
``source/``), where ``emergence.CONF_DIR`` and ``stats.CONF_DIR`` look first. An editable
install copies nothing: both packages then read ``<checkout>/conf``. Everything else is
declared in ``pyproject.toml``.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONF = Path(__file__).resolve().parent / "conf"


class build_py_with_conf(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        yaml = shutil.ignore_patterns("__pycache__", "*.pyc")
        target = Path(self.build_lib)
        shutil.copytree(CONF, target / "emergence" / "conf", ignore=yaml, dirs_exist_ok=True)
        (target / "stats" / "conf").mkdir(parents=True, exist_ok=True)
        shutil.copy2(CONF / "stats.yaml", target / "stats" / "conf" / "stats.yaml")
        shutil.copytree(CONF / "source", target / "stats" / "conf" / "source", ignore=yaml, dirs_exist_ok=True)


setup(cmdclass={"build_py": build_py_with_conf})
