"""Matmul precision (``matmul_precision``) and reduced-precision passes, against float32.

Stated tolerance (tiny GPT-NeoX, Q/K scaled x8 so attention is far from uniform, both
recipes): with every matrix product of the forward in TF32 (emulated on the CPU by
rounding its float32 inputs to TF32, tests/tf32_emulation.py; measured 3.8e-4) every
selectivity is within **1e-3 relative** of float32; with the model in bfloat16 (measured
6e-3) within **2e-2**. Flags agree for every head whose float32 selectivity is farther
than that tolerance from its threshold (thresholds put at the median here, so half the
heads are flagged). Not testable without a GPU: cuBLAS's own TF32 products (the emulation
models their input rounding, not their accumulation order) and SDPA's fp32 kernels on
CUDA; ``benchmarks/gpu_1b.py`` measures float32 against TF32 there.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from test_screen_routes import build, study_probe, synthetic, xu2026_screen
from tf32_emulation import EmulatedTF32, round_tf32
from emergence import EmergenceError
from emergence.adapters import adapter_for
from emergence.config import ScreenConfig
from emergence.loading import choose_matmul_precision, matmul_precision
from emergence.screens import screen
from emergence.screens.base import Reducer, ScreenPart

TF32_RTOL = 1e-3
BF16_RTOL = 2e-2


def test_the_policy_is_tf32_only_for_float32_products_on_cuda():
    cuda, cpu, mps = torch.device("cuda"), torch.device("cpu"), torch.device("mps")
    f32, bf16 = torch.float32, torch.bfloat16
    assert choose_matmul_precision("gpt_neox", "auto", cuda, f32) == "tf32"  # Pythia's passes
    assert choose_matmul_precision("gpt_neox", "float32", cuda, f32) == "float32"
    assert choose_matmul_precision("olmo", "auto", cuda, bf16) == "float32"  # bf16 products: nothing to change
    assert choose_matmul_precision("olmo", "tf32", cuda, f32) == "tf32"
    for device in (cpu, mps):
        assert choose_matmul_precision("gpt_neox", "tf32", device, f32) == "float32"
    with pytest.raises(EmergenceError, match="unknown matmul_precision 'fp8'; valid: auto, float32, tf32"):
        choose_matmul_precision("gpt_neox", "fp8", cuda, f32)


def test_the_switch_sets_torchs_flag_for_the_pass_and_restores_it():
    flag = torch.backends.cuda.matmul
    before = flag.fp32_precision
    seen = {}

    class Spy(Reducer):
        needs_hidden = True

        def hidden(self, last_hidden, model):
            seen["forward"] = flag.fp32_precision

        def finish(self):
            return ScreenPart()

    with matmul_precision("tf32"):
        assert flag.fp32_precision == "tf32"
        with matmul_precision("float32"):  # the reducers' sums inside a TF32 pass
            assert flag.fp32_precision == "ieee"
        assert flag.fp32_precision == "tf32"
    assert flag.fp32_precision == before
    with matmul_precision("float32"):
        assert flag.fp32_precision == before  # outside a TF32 block nothing changes

    from emergence.screens.base import run_pass

    model = build("gpt_neox")
    with matmul_precision("tf32"):
        run_pass(model, adapter_for(model), synthetic(4, 4), [Spy()], progress=False)
    assert seen["forward"] == "tf32" and flag.fp32_precision == before


def test_tf32_rounding_keeps_ten_mantissa_bits():
    x = torch.tensor([1.0, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -10, -3.0e8, 1e-30])
    got = round_tf32(x)
    assert got[:4].tolist() == [1.0, 1.0, 1 + 2 ** -9, 1 + 2 ** -10]  # ties to even
    assert torch.allclose(got[4:], x[4:], rtol=2 ** -11)


def configs():
    project = OmegaConf.structured(ScreenConfig(participation_ratio=True))
    project.pr.samples = 200
    return [("project", synthetic(40, 20), project), ("xu2026", study_probe(40, 20), xu2026_screen())]


def assert_within(reference, other, rtol):
    """Selectivities within ``rtol``; flags equal outside the band of ``rtol`` around the thresholds."""
    columns = [c for c in reference.heads.columns if c.startswith("selectivity.")]
    worst = max(float(np.nanmax(np.abs(other.heads[c] / reference.heads[c] - 1))) for c in columns)
    assert worst < rtol, worst
    compared = 0
    for c in columns:
        s = reference.heads[c].to_numpy()
        threshold = float(np.median(s))
        far = np.abs(s / threshold - 1) > rtol
        assert ((s >= threshold) == (other.heads[c].to_numpy() >= threshold))[far].all(), c
        compared += int(far.sum())
    assert compared > len(columns) * len(reference.heads) // 2  # most heads are outside the band
    return worst


@pytest.mark.parametrize("name, probe, cfg", configs(), ids=["project", "xu2026"])
def test_tf32_and_bf16_selectivities_and_flags_match_float32(name, probe, cfg):
    model = build("gpt_neox", seed=3)
    reference = screen(model, adapter_for(model), probe, cfg, progress=False)
    emulation = EmulatedTF32()
    with emulation:
        tf32 = screen(model, adapter_for(model), probe, cfg, progress=False, precision="tf32")
    assert emulation.rounded_calls > 0
    worst = assert_within(reference, tf32, TF32_RTOL)
    assert worst > 0  # the rounding did change the products
    bf16 = build("gpt_neox", seed=3).to(torch.bfloat16)
    assert_within(reference, screen(bf16, adapter_for(bf16), probe, cfg, progress=False), BF16_RTOL)
