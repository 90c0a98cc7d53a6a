"""``python -m emergence.ui``: look at the last study in one command.

- **The store**: the last job's or sweep's (:func:`remember_job`, ``<home>/outputs/last_job.json``;
  without it the default ``<home>/outputs/mlflow.db``), or ``--store URI``.
- **The UI**: for a local store, ``mlflow server --app-name emergence`` (emergence/ui_app.py) on
  ``127.0.0.1`` (``--port``, or the next free one), waited for at most ``--wait`` seconds; for a
  tracking server, its own UI. Then the links to the runs table and the curves are printed and the
  UI runs until Ctrl-C (``--check``: stopped at once, exit 1 when it did not answer).
- **The report**: the newest ``report.md`` under ``<home>/outputs/stats/``, its path and opening
  lines printed (``--open``: also opened in the browser with the runs table).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import suppress
from pathlib import Path
from typing import List, Optional

from emergence.common.mlflow_ui import experiment_id, experiment_url, link_lines
from emergence.common.paths import emergence_home

#: Where the last job's store is written down, under ``<home>/outputs``.
LAST_JOB_FILE = "last_job.json"
DEFAULT_PORT = 5000
#: The MLflow app plug-in the UI is served with (pyproject's ``mlflow.app`` entry point).
UI_APP = "emergence"
#: Lines of the report printed (its title and the opening summary).
REPORT_LINES = 30


def outputs() -> Path:
    return emergence_home() / "outputs"


def remember_job(tracking_uri: str, experiment: str) -> None:
    """Write down the store and experiment of the job or sweep that just ended (best effort)."""
    try:
        outputs().mkdir(parents=True, exist_ok=True)
        (outputs() / LAST_JOB_FILE).write_text(json.dumps(
            {"tracking_uri": tracking_uri, "experiment": experiment, "ended": time.strftime("%Y-%m-%d %H:%M:%S")}))
    except OSError:
        pass


def last_store() -> tuple:
    """``(tracking_uri, experiment)`` of the last job, else the default store's."""
    try:
        data = json.loads((outputs() / LAST_JOB_FILE).read_text())
        return str(data["tracking_uri"]), str(data.get("experiment") or "emergence")
    except (OSError, ValueError, KeyError, TypeError):
        return f"sqlite:///{outputs() / 'mlflow.db'}", "emergence"


def latest_report() -> Optional[Path]:
    """The newest ``report.md`` of the statistics (``<home>/outputs/stats/<date>/<time>/``)."""
    reports = list((outputs() / "stats").glob("**/report.md"))
    return max(reports, key=lambda p: p.stat().st_mtime) if reports else None


def free_port(start: int = 0) -> int:
    """``start`` when nothing listens there on 127.0.0.1, else (and for ``start=0``) a free port the system gives."""
    for port in (start, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError("no free port on 127.0.0.1")


def start_ui(tracking_uri: str, port: int, wait_s: float) -> tuple:
    """Start the MLflow UI (:data:`UI_APP`) on the local store at 127.0.0.1:``port`` and wait for it:
    ``(process, base URL)``; ``RuntimeError`` with the UI's last output when it does not answer."""
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    cmd = [str(mlflow_cli) if mlflow_cli.exists() else "mlflow", "server", "--backend-store-uri", tracking_uri,
           "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--app-name", UI_APP]
    log = outputs() / "mlflow_ui.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": os.environ.get("MLFLOW_DISABLE_TELEMETRY", "true")}
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as resp:
                if resp.status == 200:
                    return proc, base
        except OSError:
            time.sleep(0.5)
    stop_ui(proc)
    tail = log.read_text()[-1500:] if log.exists() else ""
    raise RuntimeError(f"mlflow ui did not answer on {base} within {wait_s:.0f} s; its output ({log}):\n{tail}")


def stop_ui(proc: subprocess.Popen, timeout_s: float = 20.0) -> None:
    """Stop the UI's whole process group (the ``mlflow`` command and the server it started, which
    holds the port) and wait until every process of it has exited (SIGKILL after ``timeout_s``)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        proc.poll()
        try:
            os.killpg(proc.pid, 0)  # any process of the group left?
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def parse(argv: List[str]) -> argparse.Namespace:
    uri, experiment = last_store()
    p = argparse.ArgumentParser(prog="python -m emergence.ui", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", default=uri, help=f"tracking URI (default: the last job's, {uri})")
    p.add_argument("--experiment", default=experiment)
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="for a local store's UI (next free one if busy)")
    p.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the UI to answer")
    p.add_argument("--open", action="store_true", help="open the runs table and the report in the browser")
    p.add_argument("--check", action="store_true", help="start the UI, print, stop it (exit 1 if it does not answer)")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    report = latest_report()
    if report is None:
        print(f"no statistics report under {outputs() / 'stats'} yet (python -m emergence writes one)")
    else:
        lines, n = report.read_text().splitlines(), REPORT_LINES
        head = "\n".join(lines[:n]) + (f"\n... ({len(lines) - n} more lines in the file)" if len(lines) > n else "")
        print(f"latest report: {report}\n\n{head}\n")
    proc = None
    base = args.store.rstrip("/")
    if not args.store.startswith(("http://", "https://")):
        try:
            proc, base = start_ui(args.store, free_port(args.port), args.wait)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    exp = experiment_id(args.store, args.experiment)
    links = link_lines(args.store, exp, base) if exp is not None else [
        f"  the UI: {base} (no experiment {args.experiment!r} in this store yet: run `python -m emergence`)"]
    print(f"MLflow UI on {args.store}:\n" + "\n".join(links))
    if args.open:
        import webbrowser

        webbrowser.open(experiment_url(args.store, exp, base) if exp else base)
        if report is not None:
            webbrowser.open(report.as_uri())
    try:
        if proc is not None and not args.check:
            print("(Ctrl-C stops the UI)")
            proc.wait()
    except KeyboardInterrupt:
        print("\nstopping the UI")
    finally:
        if proc is not None:
            stop_ui(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
