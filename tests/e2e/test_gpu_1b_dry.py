"""benchmarks/gpu_1b.py runs end to end in its CPU dry-run mode (tiny configs), so the GPU run is
one short command; without CUDA and without --dry it refuses with exit status 2."""

import commands
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def test_the_dry_run_writes_the_table_and_says_it_is_not_a_measurement(tmp_path):
    out = tmp_path / "results.md"
    proc = commands.run([sys.executable, "benchmarks/gpu_1b.py", "--dry", "--models", "pythia_1b",
                           "--out", str(out), "--workdir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert "**Not run on a GPU yet.**" in text and "not measurements" in text
    rows = [line for line in text.splitlines() if line.startswith("| pythia_1b | step")]
    assert len(rows) == 2  # two revisions through the pipeline: fetch, load, screen, ablation each
    assert "screen pass / decoder-only forward" in text and "TF32 vs float32" in text
    assert list(tmp_path.iterdir()) == [out]  # revision folders cleaned up


def test_without_cuda_it_refuses():
    if torch.cuda.is_available():
        return
    proc = commands.run([sys.executable, "benchmarks/gpu_1b.py"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr
