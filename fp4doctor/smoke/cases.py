"""The smoke GEMM problems: exact-grid NVFP4 operands and the answer a correct kernel gives.

Operands are sparse randn (about 75% zeros, like FlashInfer's fuzzer) snapped onto the
NVFP4 grid with `fp4doctor.nvfp4`, never with a library's quantize kernel, so a GEMM
failure is not confused with a quantize-module (JIT) failure. Generation and the float64
reference run on the CPU from a fixed seed: every device and every run gets the same
problem, and the reference owes nothing to the device under test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from fp4doctor.checkpoint import smoke as model_smoke
from fp4doctor.smoke import nvfp4

DEFAULT_SHAPES: tuple[tuple[int, int, int], ...] = ((128, 256, 512), (7, 256, 512), (48, 384, 256))
"""(m, n, k). N and K are multiples of 128 for every backend's constraints (trtllm's weight
shuffle, cute-dsl/b12x alignment); m = 7 needs the scale rows padded (to 128, or to 8 in
trtllm's 8x4 layout) and m = 48 takes trtllm's 128x4 path (8x4 is used for m <= 32).
The first shape is the one timed."""

# With --model, the model's own per-rank shapes, which the parent puts in the worker's
# environment (fp4doctor/checkpoint/smoke.py).
SHAPES = model_smoke.parse(os.environ.get(model_smoke.SHAPES_ENV, "")) or DEFAULT_SHAPES

SEED = 20251130
DENSITY = 0.25  # share of nonzero inputs


@dataclass(frozen=True)
class Operand:
    """One NVFP4 operand, row-major `[rows, K]` (the weight is `[N, K]`, as checkpoints hold it)."""

    packed: torch.Tensor  # uint8 [rows, K/2], element 2i in the low nibble
    scales: torch.Tensor  # float8_e4m3fn [rows, K/16], linear layout
    global_scale: torch.Tensor  # float32 0-d, encode scale (448·6/amax)
    deq: torch.Tensor  # float32 [rows, K], the exact value the bytes encode

    def scales_128x4(self) -> torch.Tensor:
        """The block scales in the 128x4 swizzled layout, as the `[round_up(rows, 128),
        round_up(K/16, 4)]` grid FlashInfer, vLLM and cuDNN take (float8_e4m3fn)."""
        return nvfp4.scale_grid(nvfp4.swizzle_128x4(self.scales), *self.scales.shape)


@dataclass(frozen=True)
class Case:
    """One problem: out[m, n] = a[m, k] @ b[n, k].T, with its float64 reference."""

    m: int
    n: int
    k: int
    a: Operand
    b: Operand
    ref: torch.Tensor  # float64 [m, n] on the CPU

    @property
    def shape(self) -> list[int]:
        return [self.m, self.n, self.k]

    @property
    def alpha(self) -> float:
        """FlashInfer's `alpha` = 1/(gs_a·gs_b): raw products times alpha give the answer."""
        return 1.0 / (float(self.a.global_scale) * float(self.b.global_scale))

    def new_output(self, device: str | torch.device) -> torch.Tensor:
        """A bf16 `[m, n]` output buffer poisoned with NaN, so unwritten tiles show."""
        return torch.full((self.m, self.n), float("nan"), dtype=torch.bfloat16, device=device)


def _sparse_randn(rows: int, cols: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(rows, cols, generator=gen, dtype=torch.float32)
    keep = torch.rand(rows, cols, generator=gen) < DENSITY
    return x * keep


def _snap(x: torch.Tensor) -> Operand:
    return Operand(*nvfp4.snap(x))


def make_case(m: int, n: int, k: int, device: str | torch.device, seed: int = SEED) -> Case:
    """The problem (m, n, k) with operands on `device`; the same bytes for every device."""
    gen = torch.Generator().manual_seed(seed + 1_000_003 * m + 1009 * n + k)
    a_x = _sparse_randn(m, k, gen)
    b_x = _sparse_randn(n, k, gen)
    a_cpu, b_cpu = _snap(a_x), _snap(b_x)
    ref = nvfp4.reference_gemm(a_cpu.deq, b_cpu.deq)
    return Case(m, n, k, _operand_to(a_cpu, device), _operand_to(b_cpu, device), ref)


def _operand_to(op: Operand, device: str | torch.device) -> Operand:
    return Operand(
        op.packed.to(device), op.scales.to(device), op.global_scale.to(device), op.deq.to(device)
    )
