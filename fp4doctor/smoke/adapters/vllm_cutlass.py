"""vLLM's own CUTLASS NVFP4 GEMM: `torch.ops._C.cutlass_scaled_fp4_mm(out, a, b, sfa, sfb, alpha)`.

The op behind vLLM's `CutlassNvFp4LinearKernel` (reference engines-nvfp4-backend-selection.md
§1.3, §1.5): a uint8 `[m, k/2]`, the weight b uint8 `[n, k/2]` (not transposed), both scales
float8_e4m3fn in the 128x4 swizzled layout `[round_up(rows, 128), round_up(k/16, 4)]`, alpha
a float32 tensor 1/(gs_a·gs_b), out bf16 `[m, n]`. vLLM is not installable on the CPU
development host, so this path is exercised only where vLLM is installed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import torch

from fp4doctor.smoke.adapters import Refused, Unavailable
from fp4doctor.smoke.cases import Case


def load_vllm_ops() -> str:
    """Load vLLM's compiled ops (`vllm._C`) and return "vllm <version>"."""
    if importlib.util.find_spec("vllm") is None:
        raise Unavailable("vLLM not installed")
    try:
        version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    try:
        importlib.import_module("vllm._C")
    except ImportError:
        # Later releases load their kernels through vllm._custom_ops.
        importlib.import_module("vllm._custom_ops")
    return f"vllm {version}"


@dataclass(frozen=True)
class VllmCutlass:
    name: str = "vllm-cutlass"
    supports_cpu: bool = False

    def load(self) -> str:
        label = load_vllm_ops()
        if not hasattr(torch.ops._C, "cutlass_scaled_fp4_mm"):
            raise Refused(f"{label} has no torch.ops._C.cutlass_scaled_fp4_mm")
        return label

    def bind(self, case: Case, out: torch.Tensor) -> Callable[[], object]:
        op = torch.ops._C.cutlass_scaled_fp4_mm
        a, b = case.a.packed, case.b.packed
        a_sf, b_sf = case.a.scales_128x4(), case.b.scales_128x4()
        alpha = torch.tensor([case.alpha], dtype=torch.float32, device=out.device)

        def call() -> object:
            return op(out, a, b, a_sf, b_sf, alpha)

        return call


ADAPTER = VllmCutlass()
