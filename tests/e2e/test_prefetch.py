"""Download pipeline (emergence/prefetch.py): fetch one revision ahead, evict behind, fail one only."""

import json
import os
import shutil
import commands
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tiny_models import save_revisions
from emergence.prefetch import Pipeline

ROOT = Path(__file__).resolve().parents[2]
FETCH_S = 0.6
SCREEN_S = 0.6


@pytest.fixture(scope="module")
def revisions_folder(tmp_path_factory):
    return save_revisions(tmp_path_factory.mktemp("src") / "tiny", "gpt_neox", steps=(1, 2, 3, 4, 5))


def drive(src: Path, cache: Path, ahead: int):
    """The real pipeline over local revision folders: a slow fetch (sleep, then copy the folder
    into ``cache``), a screen that reads the model from the fetched folder and sleeps, and
    eviction that deletes the copy. Returns (wall seconds, max folders in cache, events)."""
    from transformers import AutoModelForCausalLM

    names = sorted(p.name for p in src.iterdir() if p.is_dir())
    cache.mkdir()
    events, seen = [], [0]
    lock = threading.Lock()

    def count():
        with lock:
            seen[0] = max(seen[0], sum(1 for p in cache.iterdir() if p.is_dir()))

    def fetch(name):
        events.append(("fetch", name))
        time.sleep(FETCH_S)
        shutil.copytree(src / name, cache / name)
        count()
        return cache / name

    def evict(name, folder):
        shutil.rmtree(folder)

    tic = time.perf_counter()
    for got in Pipeline(names, fetch, evict, ahead=ahead):
        events.append(("screen", got.item))
        model = AutoModelForCausalLM.from_pretrained(got.value)  # the screen reads the fetched files
        assert model.config.num_hidden_layers == 4
        time.sleep(SCREEN_S)
        count()
        events.append(("screened", got.item))
    return time.perf_counter() - tic, seen[0], events, names


def test_prefetch_overlaps_fetch_and_screen_and_keeps_two_on_disk(revisions_folder, tmp_path):
    n = 5
    piped, most, events, names = drive(revisions_folder, tmp_path / "cache_piped", ahead=1)
    serial, most_serial, _, _ = drive(revisions_folder, tmp_path / "cache_serial", ahead=0)
    print(f"\n{n} revisions, fetch {FETCH_S}s, screen {SCREEN_S}s: pipelined {piped:.2f}s "
          f"({piped / n:.2f}s/rev), serial {serial:.2f}s ({serial / n:.2f}s/rev)")
    # the overlap is asserted by the order of events below, not by wall-clock time, which a loaded
    # machine stretches (the time saved is a figure: benchmarks/bench_prefetch.py)
    assert serial >= n * (FETCH_S + SCREEN_S)  # serial: nothing overlaps
    # at most one ahead: while revision i is screened, fetch i+1 runs and none beyond it has started
    for i, name in enumerate(names):
        at, end = events.index(("screen", name)), events.index(("screened", name))
        assert [e[1] for e in events[:end] if e[0] == "fetch"] == names[:min(i + 2, n)]
        assert set(e[1] for e in events[:at] if e[0] == "fetch") <= set(names[:i + 2])
    assert most == 2 and most_serial == 1  # eviction on: never more than two revisions on disk
    assert not any((tmp_path / "cache_piped").iterdir())  # and none left at the end


def test_a_failed_fetch_fails_only_its_revision_and_early_exit_evicts():
    evicted = []

    def fetch(i):
        if i == 1:
            raise OSError("hub unreachable")
        return f"folder{i}"

    got = list(Pipeline(range(4), fetch, lambda i, v: evicted.append(i)))
    assert [g.item for g in got] == [0, 1, 2, 3]
    assert isinstance(got[1].error, OSError) and got[1].value is None
    assert [g.value for g in got if g.error is None] == ["folder0", "folder2", "folder3"]
    assert evicted == [0, 2, 3]  # a failed fetch has nothing to evict

    evicted.clear()
    for g in Pipeline(range(5), fetch, lambda i, v: evicted.append(i)):
        if g.item == 2:
            break  # leaving the loop evicts the held revision and, once it lands, the one fetched ahead
    for _ in range(100):
        if len(evicted) == 3:
            break
        time.sleep(0.02)
    assert evicted == [0, 2, 3]


def test_the_load_stage_runs_one_ahead_after_its_fetch_and_fails_its_own_item():
    """fetch + load of revision i+1 overlap the screen of revision i; a load that raises fails its item."""
    events, lock = [], threading.Lock()

    def note(what):
        with lock:
            events.append(what)

    def fetch(i):
        note(("fetch", i))
        time.sleep(0.3)
        return f"folder{i}"

    def load(i, folder):
        note(("load", i))
        time.sleep(0.3)
        if i == 2:
            raise RuntimeError("truncated weights")
        return f"model{i}"

    tic = time.perf_counter()
    got = []
    for g in Pipeline(range(4), fetch, load=load):
        note(("screen", g.item))
        time.sleep(0.6)
        got.append((g.item, g.value, g.loaded, type(g.error).__name__ if g.error else None, g.load_s > 0.25))
    wall = time.perf_counter() - tic
    assert got == [(0, "folder0", "model0", None, True), (1, "folder1", "model1", None, True),
                   (2, "folder2", None, "RuntimeError", False), (3, "folder3", "model3", None, True)]
    assert wall < 0.6 + 4 * 0.6 + 1.0  # the first fetch + load, then about max(fetch + load, screen) each
    for i in range(3):  # item i+1 is fetched, then loaded, before item i's screen ends; nothing beyond it
        assert events.index(("fetch", i + 1)) < events.index(("load", i + 1)) < events.index(("screen", i + 1))
        assert events.index(("fetch", i + 1)) < events.index(("screen", i)) + 1
        if i + 2 < 4:
            assert events.index(("fetch", i + 2)) > events.index(("screen", i))


def test_auto_eviction_deletes_only_when_the_rest_would_not_fit(tmp_path, monkeypatch):
    import shutil as sh
    from collections import namedtuple

    from emergence import prefetch

    folder = tmp_path / "rev"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"x" * 1000)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(sh, "disk_usage", lambda _p: usage(10**6, 0, 5000))
    assert not prefetch.disk_short(folder, 4)  # 4 more of 1000 B (+10%) fit in 5000 B
    assert prefetch.disk_short(folder, 5)
    assert not prefetch.disk_short(folder, 0)  # nothing left to come: keep it


HUB_JOB = textwrap.dedent("""
    import json, sys
    from emergence.job import run_job
    from emergence import EmergenceError
    from emergence.screening import JobFailed
    from emergence.catalog import compose
    store = sys.argv[1]
    cfg = compose(["model=pythia_70m", "revision=logspaced", "revision.k=3", "cache.evict=true",
                   "corpus.n_sequences=16", "corpus.batch_size=8", "corpus.segment_length=12",
                   "screen.memory_gb=0.01", "stats=false",
                   f"tracking.uri=sqlite:///{store}/mlflow.db", f"tracking.artifacts={store}/art"])
    try:
        run_job(cfg, progress=False)
        print(json.dumps({"failed": None}))
    except JobFailed as exc:
        print(json.dumps({"failed": str(exc)}))
    except EmergenceError as exc:
        print(json.dumps({"stopped": str(exc)}))
""")


def test_hub_job_prefetches_from_the_cache_evicts_behind_and_stops_at_the_missing_revision(tmp_path):
    """run_job on a hub model (a real offline HF cache): step1 and step143000 cached, step512 not.
    step1 is screened (batch size from screen.memory_gb, capped by corpus.batch_size); the missing
    step512 stops the job with the offline message before its run is claimed (issue 30: every later
    revision would fail alike; no FAILED run per revision); with cache.evict=true nothing is left in
    the cache."""
    from test_loading import fake_hub_cache

    cache = tmp_path / "hub"
    fake_hub_cache(cache, "EleutherAI/pythia-70m", ["step1", "step143000"])
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    proc = commands.run([sys.executable, "-c", HUB_JOB, str(tmp_path / "store")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stopped = json.loads(proc.stdout.strip().splitlines()[-1])["stopped"]
    assert stopped.startswith("EleutherAI/pythia-70m at revision 'step512' is not in the local HF cache and "
                              "HF_HUB_OFFLINE is set"), stopped
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/store/mlflow.db")
    exp = client.get_experiment_by_name("emergence")
    status = {r.data.tags["emergence.revision"]: r.info.status for r in client.search_runs([exp.experiment_id])}
    assert status == {"step1": "FINISHED"}
    done = [r for r in client.search_runs([exp.experiment_id]) if r.info.status == "FINISHED"]
    assert all(r.data.params["batch_size"] == "8" for r in done)  # corpus.batch_size caps the budget's
    assert all("screen.memory_gb" in r.data.params["memory_budget"] for r in done)
    assert all("fetch_wait_seconds" in r.data.metrics for r in done)
    assert {r.data.params["source"] for r in done} == {"EleutherAI/pythia-70m@step1"}
    refs = cache / "models--EleutherAI--pythia-70m" / "refs"
    left = sorted(p.name for p in refs.iterdir() if (cache / "models--EleutherAI--pythia-70m" / "snapshots" /
                                                      p.read_text().strip()).exists())
    assert left == ["step143000"]  # step1 evicted behind the screen; step143000, never reached, kept


def test_only_the_files_a_screen_needs_are_downloaded():
    from emergence.loading import screen_patterns

    both = screen_patterns(["config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json"])
    assert "*.safetensors" in both and not any(p.endswith(".bin") for p in both)  # one weight format
    assert "pytorch_model*.bin" in screen_patterns(["config.json", "pytorch_model.bin"])
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= set(both)
    assert not any(p in ("*", "*.msgpack", "*.h5", "*.ckpt") for p in screen_patterns(None))


def test_a_multirun_sweep_fetches_and_loads_the_next_job_ahead(tmp_path):
    """``-m`` over a hub model's revisions (a real offline HF cache), the basic launcher: each job is
    one pinned revision, and the sweep's pipeline (emergence/sweep_prefetch.py) hands every job
    its revision already loaded (cache.load_ahead=true on the CPU here); cache.evict=null (auto)
    keeps them, the disk being large enough."""
    import mlflow

    from test_loading import fake_hub_cache

    cache = tmp_path / "hub"
    fake_hub_cache(cache, "EleutherAI/pythia-70m", ["step1", "step512", "step143000"])
    store = tmp_path / "store"
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", MLFLOW_ENABLE_ASYNC_LOGGING="false")
    cmd = [sys.executable, "-m", "emergence", "-m", "model=pythia_70m", "revision=logspaced", "revision.k=3",
           "cache.load_ahead=true", "corpus.n_sequences=8", "corpus.batch_size=8", "corpus.segment_length=12",
           "stats=false", f"tracking.uri=sqlite:///{store}/mlflow.db", f"tracking.artifacts={store}/art",
           f"hydra.sweep.dir={tmp_path}/multirun"]
    proc = commands.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Launching 3 jobs" in proc.stdout + proc.stderr
    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("emergence")
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("emergence.kind") != "sweep"]
    assert sorted(r.data.tags["emergence.revision"] for r in runs) == ["step1", "step143000", "step512"]
    assert all(r.info.status == "FINISHED" for r in runs)
    assert all(r.data.params["loaded_ahead"] == "true" for r in runs)  # handed over by the sweep's pipeline
    assert all(r.data.params["matmul_precision"] == "float32" for r in runs)  # CPU: nothing changes
    snapshots = cache / "models--EleutherAI--pythia-70m" / "snapshots"
    assert len(list(snapshots.iterdir())) == 3  # auto eviction: the disk holds the study, nothing deleted
