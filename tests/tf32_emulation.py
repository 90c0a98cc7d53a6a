"""TF32 matrix products emulated on the CPU, for tests of ``matmul_precision=tf32``.

On CUDA with ``torch.backends.cuda.matmul.fp32_precision = "tf32"``, cuBLAS rounds each
float32 input of a matrix product to TF32 (the float32 exponent, 10 explicit mantissa bits,
round to nearest even) and accumulates in float32. :class:`EmulatedTF32` does the same
rounding on the CPU, for every float32 input of the products a forward runs (``linear``,
``matmul``, ``bmm``, ``baddbmm``, ``einsum``, ``scaled_dot_product_attention``; SDPA's inputs
rounded too, the pessimistic case), and only while torch's flag says ``tf32``, so it follows
the flag exactly as cuBLAS does (the screen's reducers switch it off for their sums).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

#: The products whose float32 inputs TF32 rounds.
PRODUCTS = {torch.nn.functional.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm,
            torch.baddbmm, torch.einsum, torch.nn.functional.scaled_dot_product_attention}


def round_tf32(x: torch.Tensor) -> torch.Tensor:
    """``x`` (float32) rounded to TF32: 10 mantissa bits, ties to even (finite values)."""
    bits = x.contiguous().view(torch.int32)
    lsb = (bits >> 13) & 1
    rounded = (bits + 0x0FFF + lsb) & ~0x1FFF
    return rounded.view(torch.float32).view(x.shape)


def _round(value):
    if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
        return round_tf32(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_round(v) for v in value)
    return value


class EmulatedTF32(TorchFunctionMode):
    """Within the mode, float32 inputs of matrix products are rounded to TF32 whenever
    ``torch.backends.cuda.matmul.fp32_precision == "tf32"``."""

    def __init__(self):
        super().__init__()
        self.rounded_calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in PRODUCTS and torch.backends.cuda.matmul.fp32_precision == "tf32":
            self.rounded_calls += 1
            args, kwargs = _round(args), {k: _round(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)
