"""``python -m emergence.families [list | check DIR [--family NAME]]``.

``list`` (the default): every family with its HF model types and hook paths. ``check DIR``:
the checks of emergence/family_check.py on a checkpoint (an HF model folder, or a folder of
revisions: its first), one line each; exit 0 when all pass, 1 when one fails, 2 when the
checkpoint is refused (no family covers its model type, or ``--family`` contradicts it).
"""

from __future__ import annotations

import argparse
import sys

from emergence import EmergenceError, families


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emergence.families", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("list", help="every family, its model types and hook paths")
    check = sub.add_parser("check", help="verify a family on a checkpoint folder, one line per check")
    check.add_argument("folder", help="an HF model folder (config.json), or a folder of revisions")
    check.add_argument("--family", default=families.AUTO, help="the family to check (default: auto)")
    args = parser.parse_args(argv)
    if args.command in (None, "list"):
        for family in families.families().values():
            hooks = (f"{family.layers}[i].{family.attention}, .{family.projection}" if family.layers
                     else "found in the model")
            print(f"{family.name}: {', '.join(family.model_types) or '(any common-layout decoder)'}; {hooks}; "
                  f"{family.description}")
        return 0
    from emergence.family_check import run_checks  # (torch and transformers only for a check)

    try:
        lines = run_checks(args.folder, args.family)
    except EmergenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = [line for line in lines if not line.passed]
    print(f"{len(lines) - len(failed)} of {len(lines)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
