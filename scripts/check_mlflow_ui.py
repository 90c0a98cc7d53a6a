#!/usr/bin/env python
"""Documented check (docs/checks.md): what a researcher sees on opening the study in the MLflow UI.

Starts a real ``mlflow server`` on 127.0.0.1 over a store the tool wrote, opens pages in
headless Chromium (driven through chromedriver's W3C HTTP interface: no Python package
needed), saves a PNG of each and says what each shows:

1. ``runs``: the runs-table URL the tool prints (``.../runs?viewStateShareKey=emergence-runs&
   workflowType=machine_learning``), in a fresh browser: must show the runs table with the key
   metrics as columns (``columns``);
2. ``view``: the saved view's URL the tool prints (``viewStateShareKey=emergence-curves``,
   ``compareRunsMode=CHART``): must show the runs grouped by model and the charts against tokens;
   whether a chart legend has an empty "Unassigned" entry is reported (``legend``);
3. ``bare``: the bare experiment URL ``#/experiments/<id>`` (what the experiment list links
   to) in a fresh browser: must show the runs table (MLflow 3.17.2 alone opens it on the GenAI
   overview; the UI the tool serves, emergence/ui_app.py, sets the "Model training" switch);
4. ``run``: a screen run's page ``#/experiments/<id>/runs/<run>`` in a fresh browser: must
   show the model-training run page (its model and system metrics tabs);
5. ``switched``: "Model training" clicked once in the sidebar, then the bare URL opened again
   in that browser: must show the runs table (the browser remembers the switch).

The server is started as ``python -m emergence.ui`` starts it (``mlflow server --app-name
emergence``).

Without ``--store`` it first makes a small study with the tool in a temporary EMERGENCE_HOME
(two fast toys trained in seconds, a ``-m`` sweep with its parent run). With ``--store`` it
opens a copy of that SQLite store, after ``emergence.tracking.prepare_store`` (the tags any
job of the tool writes). Needs Debian's ``chromium`` and ``chromium-driver``. Exit 0 when
every page shows what it must and the view's legends have no empty entry.

    .venv/bin/python scripts/check_mlflow_ui.py [--store FILE.db] [--experiment emergence] [--out DIR]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1600,1000"]
#: How many charts the page has drawn (plotly's plot areas with their traces).
PLOTS = "return document.querySelectorAll('.js-plotly-plot .scatterlayer .trace').length;"
#: Columns the runs-table view must show (emergence/common/mlflow_ui.py, runs_view).
RUNS_COLUMNS = ("fraction.bos", "fraction.induction", "count.bos", "count.induction")
STUDY = ["-m", "model=toy_neox,toy_olmo", "recipe@model.recipe=fast_neox", "model.family=auto", "corpus.n_sequences=64", "stats=false"]


def http(method: str, url: str, body=None, timeout: float = 120.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


def wait_until(what: str, ready, timeout: float, every: float = 1.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            got = ready()
            if got:
                return got
        except Exception:  # noqa: BLE001  (not up yet)
            pass
        time.sleep(every)
    raise SystemExit(f"check failed: {what} not ready after {timeout:.0f} s")


def make_study(home: Path) -> str:
    """A small study made by the tool itself; returns its store's URI."""
    env = dict(os.environ, EMERGENCE_HOME=str(home), HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "emergence", *STUDY]
    print("making a study:", " ".join(cmd[1:]), flush=True)
    proc = subprocess.run(cmd, cwd=home, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"check failed: the study's sweep exited {proc.returncode}: {proc.stderr[-2000:]}")
    return f"sqlite:///{home}/outputs/mlflow.db"


def copy_store(store: Path, work: Path, experiment: str) -> str:
    """A copy of ``store`` with the tags the tool writes (its runs' artifacts stay where they are)."""
    from emergence.common.store import prepare_store

    shutil.copy2(store, work / "mlflow.db")
    uri = f"sqlite:///{work}/mlflow.db"
    prepare_store(uri, experiment)
    return uri


def start_server(uri: str, work: Path, port: int) -> subprocess.Popen:
    from emergence.ui import UI_APP

    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    mlflow = str(Path(sys.executable).with_name("mlflow"))
    cmd = [mlflow, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--backend-store-uri", uri,
           "--app-name", UI_APP]  # as python -m emergence.ui serves it
    server = subprocess.Popen(cmd, cwd=work, env=env, stdout=open(work / "server.log", "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    wait_until("mlflow server", lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status
               == 200, timeout=300)
    return server


class Browser:
    """One headless Chromium session (a fresh profile), through chromedriver."""

    def __init__(self, driver: str, profile: Path):
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": shutil.which("chromium") or "/usr/bin/chromium",
            "args": CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]}}}}
        self.base = f"{driver}/session/{http('POST', f'{driver}/session', caps)['value']['sessionId']}"

    def open(self, url: str) -> None:
        http("POST", f"{self.base}/url", {"url": url})

    def run(self, script: str, *args):
        return http("POST", f"{self.base}/execute/sync", {"script": script, "args": list(args)})["value"]

    def text(self) -> str:
        return self.run("return document.body ? document.body.innerText : '';") or ""

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(http("GET", f"{self.base}/screenshot")["value"]))

    def click_text(self, label: str) -> bool:
        return self.run("const el = [...document.querySelectorAll('button, label, span, div')]"
                        ".find(e => e.children.length === 0 && e.textContent.trim() === arguments[0]);"
                        "if (!el) return false; el.click(); return true;", label)

    def close(self) -> None:
        http("DELETE", self.base)


def what_shows(text: str, view_section: str) -> str:
    """The page in a few words, from its text: the runs table (with the view's charts), the GenAI
    overview, or something else."""
    if "Run Name" in text and "matching runs" in text:
        return "runs table, charts of the saved view" if (view_section in text and "Group:" in text) else "runs table"
    if "Model metrics" in text and "System metrics" in text:
        return "run page, model training"
    if "Overview" in text and "Traces" in text:
        return "GenAI overview"
    return "something else"


def look(browser: Browser, url: str, want: str, view_section: str, shot: Path, timeout: float = 120.0) -> str:
    """Open ``url`` (None: stay), wait until the page shows ``want`` (or anything known, for
    ``want=None``), let the charts draw, save a screenshot; returns what it shows."""
    if url:
        browser.open(url)
    try:
        wait_until(want or "a known page", lambda: (what_shows(browser.text(), view_section) == want) if want else
                   what_shows(browser.text(), view_section) != "something else", timeout=timeout)
        if want and "charts" in want:  # the charts draw after the text: wait for the first row of them
            wait_until("the charts", lambda: browser.run(PLOTS) >= 3, timeout=timeout)
    except SystemExit:
        pass  # reported below as what it shows
    time.sleep(3)
    browser.screenshot(shot)
    return what_shows(browser.text(), view_section)


def check_pages(port: int, experiment_id: str, run_id: str, out: Path, work: Path) -> dict:
    from emergence.common.mlflow_ui import experiment_url, view_url
    from emergence.ui import free_port

    section = "Against tokens"
    base = f"http://127.0.0.1:{port}"
    bare = f"{base}/#/experiments/{experiment_id}"
    driver_port = free_port()
    driver = subprocess.Popen([shutil.which("chromedriver") or "/usr/bin/chromedriver", f"--port={driver_port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    found = {}
    try:
        driver_url = f"http://127.0.0.1:{driver_port}"
        wait_until("chromedriver", lambda: http("GET", f"{driver_url}/status")["value"]["ready"], timeout=60)
        pages = [("runs", experiment_url(base, experiment_id), "runs table"),
                 ("view", view_url(base, experiment_id), "runs table, charts of the saved view"),
                 ("bare", bare, None),
                 ("run", f"{bare}/runs/{run_id}", None)]
        for name, url, want in pages:
            browser = Browser(driver_url, work / f"profile-{name}")
            try:
                found[name] = (url, look(browser, url, want, section, out / f"{name}.png"))
                if name == "runs":  # the screen runs' table: the key metrics as columns, no parent row
                    text = browser.text()
                    missing = [c for c in RUNS_COLUMNS if c not in text]
                    found["columns"] = (url, "key metric columns" if not missing else f"missing {', '.join(missing)}")
                if name == "view":  # an empty legend entry is a group of runs without the model tag
                    found["legend"] = (url, "an 'Unassigned' legend entry" if "Unassigned" in browser.text()
                                       else "no empty legend entry")
                if name == "bare":  # the same browser: the sidebar's switch once, then the bare URL again
                    clicked = browser.click_text("Model training")
                    time.sleep(3)
                    browser.open("about:blank")
                    found["switched"] = (bare, look(browser, bare, "runs table", section, out / "switched.png")
                                         if clicked else "no 'Model training' switch found")
            finally:
                browser.close()
    finally:
        driver.terminate()
        driver.wait(timeout=30)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, help="an SQLite store the tool wrote (default: make a small study)")
    parser.add_argument("--experiment", default="emergence")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "ui_check", help="where the screenshots go")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import mlflow

    from emergence.ui import free_port

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ui_check_") as tmp:
        work = Path(tmp)
        uri = copy_store(args.store.resolve(), work, args.experiment) if args.store else make_study(work)
        exp = mlflow.MlflowClient(uri).get_experiment_by_name(args.experiment)
        if exp is None:
            raise SystemExit(f"check failed: no experiment {args.experiment!r} in {uri}")
        port = free_port()
        server = start_server(uri, work, port)
        try:
            screen_run = mlflow.MlflowClient(uri).search_runs([exp.experiment_id], "tags.`emergence.kind` = 'screen'",
                                                              max_results=1)[0]
            found = check_pages(port, exp.experiment_id, screen_run.info.run_id, args.out, work)
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=60)
    print(f"MLflow {mlflow.__version__} UI, experiment {args.experiment!r} (id {exp.experiment_id}):")
    for name, (url, shows) in found.items():
        print(f"  {name:9} {shows:40} {args.out / (name + '.png')}  ({url})")
    must = {"runs": "runs table", "columns": "key metric columns", "view": "runs table, charts of the saved view",
            "legend": "no empty legend entry", "bare": "runs table", "run": "run page, model training",
            "switched": "runs table"}
    bad = [name for name, want in must.items() if found.get(name, ("", ""))[1] != want]
    print("check passed" if not bad else f"check failed: {', '.join(bad)} did not show what they must")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
