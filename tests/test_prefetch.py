"""Download pipeline (emergence/prefetch.py): fetch one revision ahead, evict behind, fail one only."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tiny_models import save_revisions
from emergence.prefetch import Pipeline

ROOT = Path(__file__).resolve().parents[1]
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
    # per revision close to max(fetch, screen), not their sum: n*max + the first fetch, plus slack
    assert piped < n * max(FETCH_S, SCREEN_S) + FETCH_S + 1.5
    assert serial >= n * (FETCH_S + SCREEN_S)
    assert piped < 0.8 * serial
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


HUB_JOB = textwrap.dedent("""
    import json, sys
    from emergence.job import JobFailed, run_job
    from emergence.registry import compose
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
""")


def test_hub_job_prefetches_from_the_cache_evicts_behind_and_fails_the_missing_revision(tmp_path):
    """run_job on a hub model (a real offline HF cache): step1 and step143000 cached, step512 not.
    The missing one fails its own run with the offline message; the others are screened (batch
    size from screen.memory_gb, capped by corpus.batch_size); with cache.evict=true nothing is
    left in the cache."""
    from test_loading import fake_hub_cache

    cache = tmp_path / "hub"
    fake_hub_cache(cache, "EleutherAI/pythia-70m", ["step1", "step143000"])
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", HUB_JOB, str(tmp_path / "store")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    failed = json.loads(proc.stdout.strip().splitlines()[-1])["failed"]
    assert failed.startswith("pythia_70m: 1 of 3 revision(s) failed: step512: FetchFailed: EleutherAI/pythia-70m "
                             "at revision 'step512' is not in the local HF cache and HF_HUB_OFFLINE is set")
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/store/mlflow.db")
    exp = client.get_experiment_by_name("emergence")
    status = {r.data.tags["emergence.revision"]: r.info.status for r in client.search_runs([exp.experiment_id])}
    assert status == {"step1": "FINISHED", "step512": "FAILED", "step143000": "FINISHED"}
    done = [r for r in client.search_runs([exp.experiment_id]) if r.info.status == "FINISHED"]
    assert all(r.data.params["batch_size"] == "8" for r in done)  # corpus.batch_size caps the budget's
    assert all("screen.memory_gb" in r.data.params["memory_budget"] for r in done)
    assert all("fetch_wait_seconds" in r.data.metrics for r in done)
    assert {r.data.params["source"] for r in done} == {"EleutherAI/pythia-70m@step1",
                                                       "EleutherAI/pythia-70m@step143000"}
    snapshots = cache / "models--EleutherAI--pythia-70m" / "snapshots"
    assert not snapshots.exists() or not any(snapshots.iterdir())  # evicted behind the screen


def test_only_the_files_a_screen_needs_are_downloaded():
    from emergence.loading import screen_patterns

    both = screen_patterns(["config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json"])
    assert "*.safetensors" in both and not any(p.endswith(".bin") for p in both)  # one weight format
    assert "pytorch_model*.bin" in screen_patterns(["config.json", "pytorch_model.bin"])
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= set(both)
    assert not any(p in ("*", "*.msgpack", "*.h5", "*.ckpt") for p in screen_patterns(None))
