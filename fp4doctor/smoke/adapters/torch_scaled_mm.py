"""PyTorch's own NVFP4 GEMM: `torch._scaled_mm` on `float4_e2m1fn_x2` operands (cuBLASLt).

Operands as torchao's NVFP4 tensor passes them: a `[m, k/2]` and the weight `[n, k/2]`
viewed as `torch.float4_e2m1fn_x2`, the weight transposed; block scales float8_e4m3fn in the
128x4 swizzled layout (flat); bf16 out. `_scaled_mm` takes no NVFP4 global scale, so alpha
1/(gs_a·gs_b) multiplies the result afterwards (torchao does the same). On SM90 cuBLASLt
refuses it: `CUBLAS_STATUS_NOT_SUPPORTED` (reference h200-floor-probe.json).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fp4doctor.smoke import nvfp4
from fp4doctor.smoke.adapters import Unavailable
from fp4doctor.smoke.cases import Case


@dataclass(frozen=True)
class TorchScaledMm:
    name: str = "torch-scaled-mm"
    supports_cpu: bool = False

    def load(self) -> str:
        label = f"torch {torch.__version__}"
        if not hasattr(torch, "float4_e2m1fn_x2") or not hasattr(torch, "_scaled_mm"):
            raise Unavailable(f"{label} has no torch.float4_e2m1fn_x2 / torch._scaled_mm")
        return label

    def bind(self, case: Case, out: torch.Tensor) -> Callable[[], object]:
        fp4 = torch.float4_e2m1fn_x2
        a = case.a.packed.view(fp4)
        b = case.b.packed.view(fp4)
        a_sf = nvfp4.swizzle_128x4(case.a.scales).view(torch.float8_e4m3fn)
        b_sf = nvfp4.swizzle_128x4(case.b.scales).view(torch.float8_e4m3fn)
        alpha = torch.tensor(case.alpha, dtype=torch.float32, device=out.device)

        def call() -> object:
            raw = torch._scaled_mm(a, b.t(), a_sf, b_sf, out_dtype=torch.bfloat16)
            return torch.mul(raw, alpha, out=out)

        return call


ADAPTER = TorchScaledMm()
