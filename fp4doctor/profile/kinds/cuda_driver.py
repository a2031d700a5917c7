"""`cuda_driver: SPEC` — the newest CUDA version the installed driver supports (NVML).

- cuda_driver: ">=12.8"
"""

from __future__ import annotations

from dataclasses import dataclass

from fp4doctor.profile.kinds.base import Context, VersionKind


@dataclass(frozen=True)
class CudaDriver(VersionKind):
    """The driver supports a CUDA version in the range."""

    key = "cuda_driver"
    label = "CUDA driver"
    words = "driver supports CUDA"

    def found(self, ctx: Context) -> str | None:
        return ctx.facts.nvml.cuda_driver_version

    def missing(self, ctx: Context) -> str:
        return f"CUDA driver version unknown (NVML: {ctx.facts.nvml.status})"
