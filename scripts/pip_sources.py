"""Print pip's configured package sources as uv options, one per line (scripts/setup.sh).

uv reads neither pip.conf nor the PIP_* variables: without this, a machine whose pip takes packages
from a mirror, a wheel folder or under a constraints file would have uv take them from PyPI,
unconstrained. ``pip config list`` holds the files' settings and the environment's (``:env:``).
A ``file://`` index or a folder that does not exist is left out (pip ignores it with a warning;
uv would stop). ``--index-strategy unsafe-best-match`` makes uv choose among all indexes as pip
does (the newest version anywhere), not from the first index that has the package.
"""

import os
import shlex
import subprocess
import sys

OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
           "constraint": "--constraint"}


def exists(location: str) -> bool:
    """Whether a source is there to read: a remote URL is taken as given, a local one must exist."""
    if location.startswith("file://"):
        return os.path.exists(location[len("file://"):])
    return "://" in location or os.path.exists(location)


def main() -> None:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    print("--index-strategy\nunsafe-best-match")
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        option = OPTIONS.get(key.rsplit(".", 1)[-1])
        for location in shlex.split(value.strip("'\"")) if option else ():
            if exists(location):
                print(f"{option}\n{location}")


if __name__ == "__main__":
    main()
