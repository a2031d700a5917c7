"""Emulation: dequantise with fp4doctor.nvfp4, multiply in float32. Runs on CPU and CUDA.

The path that always runs (vLLM's `EmulationNvFp4LinearKernel` does the same), so the
whole smoke pipeline is exercised on every host, GPU or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fp4doctor.smoke import nvfp4
from fp4doctor.smoke.cases import Case


@dataclass(frozen=True)
class Emulation:
    name: str = "emulation"
    supports_cpu: bool = True

    def load(self) -> str:
        return f"torch {torch.__version__}"

    def bind(self, case: Case, out: torch.Tensor) -> Callable[[], object]:
        a, b = case.a, case.b

        def call() -> object:
            a_deq = nvfp4.dequantize(a.packed, a.scales, a.global_scale)
            b_deq = nvfp4.dequantize(b.packed, b.scales, b.global_scale)
            return out.copy_(a_deq @ b_deq.T)

        return call


ADAPTER = Emulation()
