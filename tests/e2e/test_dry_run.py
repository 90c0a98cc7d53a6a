"""`dry_run=true`: the planned jobs listed offline, from the stored revision snapshots; no model
loaded (from_pretrained is booby-trapped), no MLflow store created, exit 0."""

import os
import re
import commands
import sys
import textwrap
from pathlib import Path

from test_loading import fake_hub_cache

ROOT = Path(__file__).resolve().parents[2]

#: Runs the real CLI with every model load and every hub download made fatal.
TRAPPED = textwrap.dedent("""
    import sys
    import huggingface_hub, transformers

    def trap(*a, **k):
        print("TRAP: a model was loaded or downloaded", file=sys.stderr)
        raise SystemExit(99)

    transformers.PreTrainedModel.from_pretrained = classmethod(trap)
    transformers.AutoModelForCausalLM.from_pretrained = trap
    huggingface_hub.snapshot_download = trap
    sys.argv = ["emergence"] + sys.argv[1:]
    from emergence.__main__ import cli
    cli()
""")


def run(tmp_path, *args):
    cache = tmp_path / "hub"
    if not cache.exists():  # the local HF cache knows one revision of pythia-1b
        fake_hub_cache(cache, "EleutherAI/pythia-1b", ["step1000"])
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    store = tmp_path / "store"
    proc = commands.run([sys.executable, "-c", TRAPPED, *args, f"tracking.uri=sqlite:///{store}/mlflow.db",
                           f"hydra.sweep.dir={tmp_path}/sweep"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "TRAP" not in proc.stderr
    assert not store.exists() and not (tmp_path / "sweep").exists()  # no store, no run, no sweep folder
    return proc


def jobs(stdout: str):
    return [line.split() for line in stdout.splitlines() if re.match(r"^\s*\d+\s+\S+\s+step", line)]


def test_dry_run_of_the_papers_three_models_lists_30_jobs_offline(tmp_path):
    proc = run(tmp_path, "-m", "model=pythia_1b,olmo_1b_0724,olmoe_1b_7b_0924", "revision=logspaced",
               "dry_run=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = jobs(proc.stdout)
    assert len(rows) == 30 and "dry run: 30 job(s)" in proc.stdout
    assert [r[1] for r in rows].count("pythia_1b") == 10
    assert [r[1] for r in rows].count("olmo_1b_0724") == 10
    assert [r[1] for r in rows].count("olmoe_1b_7b_0924") == 10
    by_revision = {(r[1], r[2]): r for r in rows}
    assert by_revision["pythia_1b", "step143000"][4] == "299,892,736,000"  # 143000 x 2,097,152
    assert by_revision["olmoe_1b_7b_0924", "step1220000-tokens5117B"][4] == "5,117,000,000,000"
    assert by_revision["olmo_1b_0724", "step1454000-tokens3048B"][4] == "3,048,000,000,000"
    assert by_revision["pythia_1b", "step1000"][5] == "cached," and by_revision["pythia_1b", "step1000"][7] == "KB"
    assert by_revision["pythia_1b", "step3000"][5:8] == ["download;", "hub", "unreachable"]  # (HF_HUB_OFFLINE: tests/conftest.py)
    assert "Launching" not in proc.stdout + proc.stderr


def test_single_process_dry_run_and_bad_input(tmp_path):
    proc = run(tmp_path, "model=pythia_1b", "revision=logspaced", "dry_run=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(jobs(proc.stdout)) == 10 and "dry run: 10 job(s), screen all" in proc.stdout
    proc = run(tmp_path, "model=pythia_1b", "dry_run=true", "screen.memory_gb=0")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: screen.memory_gb=0.0 must be a finite number > 0")


def test_batch_size_from_a_memory_budget_and_dtype_per_family():
    import torch
    from transformers import GPTNeoXConfig, OlmoeConfig

    from emergence.loading import CPU_DEFAULT_MEMORY_GB, choose_dtype, plan_batch_size, sequence_bytes

    pythia_1b = GPTNeoXConfig(hidden_size=2048, num_attention_heads=8, num_hidden_layers=16,
                              intermediate_size=8192, vocab_size=50304)
    # 16 H T R + w T (9 d + 3 f), T = 63 (the default probe), float32; R = T (the full map) by default
    assert sequence_bytes(pythia_1b, 63, torch.float32) == 16 * 8 * 63**2 + 4 * 63 * (9 * 2048 + 3 * 8192)
    olmoe = OlmoeConfig(hidden_size=2048, num_attention_heads=16, intermediate_size=1024, num_experts_per_tok=8)
    assert sequence_bytes(olmoe, 256, torch.bfloat16) == 16 * 16 * 256**2 + 2 * 256 * (9 * 2048 + 3 * 8192)
    # The xu2026 recipe reads one row a query (R = 1): no full map is reserved, more sequences fit.
    assert sequence_bytes(olmoe, 256, torch.bfloat16, rows=1) == 16 * 16 * 256 + 2 * 256 * (9 * 2048 + 3 * 8192)
    cpu = torch.device("cpu")
    assert plan_batch_size(olmoe, 256, torch.bfloat16, cpu, 4.0, cap=10**6, rows=1).fits > \
        plan_batch_size(olmoe, 256, torch.bfloat16, cpu, 4.0, cap=10**6).fits
    cpu = torch.device("cpu")
    plan = plan_batch_size(pythia_1b, 63, torch.float32, cpu, None, cap=100)
    assert plan.budget_source == "CPU default" and plan.budget_bytes == CPU_DEFAULT_MEMORY_GB * 2**30
    assert plan.batch_size == 100 and plan.fits > 100  # corpus.batch_size is the upper bound
    small = plan_batch_size(pythia_1b, 256, torch.float32, cpu, 1.0, cap=100)
    fixed = 8 * 1024 * 50304
    assert small.batch_size == (2**30 - fixed) // sequence_bytes(pythia_1b, 256, torch.float32) < 100
    assert plan_batch_size(pythia_1b, 256, torch.float32, cpu, 0.001, cap=100).batch_size == 1  # never 0
    assert "screen.memory_gb" in small.describe() and f"batch {small.batch_size}" in small.describe()
    # dtype: fp32 on the CPU; on an accelerator bf16 for OLMo/OLMoE, fp32 for Pythia; fp16 never for Pythia
    for device in ("cuda", "mps"):
        dev = torch.device(device)
        assert choose_dtype("olmo", "auto", dev) == choose_dtype("olmoe", "auto", dev) == torch.bfloat16
        assert choose_dtype("gpt_neox", "auto", dev) == torch.float32
    assert {choose_dtype(f, "auto", cpu) for f in ("gpt_neox", "olmo", "olmoe")} == {torch.float32}
    assert choose_dtype("gpt_neox", "bfloat16", torch.device("cuda")) == torch.bfloat16


def test_dry_run_says_which_toys_will_be_trained_and_about_how_long(tmp_path):
    """A toy suite not trained yet: one line per toy, its steps and an estimate on 2 quiet cores
    (emergence/toy/recipe.py, estimated_training_seconds); a trained one is not listed."""
    from emergence.toy.recipe import ToyRecipeConfig, estimated_training_seconds

    proc = run(tmp_path, "-m", "model=toy_neox,toy_olmo", f"cache.toy_dir={tmp_path}/toy", "dry_run=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("first: train ")]
    assert [line.split(":")[1].strip() for line in lines] == ["train toy_neox", "train toy_olmo"], proc.stdout
    assert re.search(r"toy_neox: 3000 steps, about \d+ min on 2 quiet CPU cores", lines[0]), lines[0]
    # the estimate grows with the work: twice the steps, twice the time; wider, longer per step
    base = ToyRecipeConfig(steps=1000)
    assert estimated_training_seconds(ToyRecipeConfig(steps=2000)) == 2 * estimated_training_seconds(base)
    assert estimated_training_seconds(ToyRecipeConfig(steps=1000, d_model=128)) > estimated_training_seconds(base)
