"""`cuda_runtime: SPEC` — the CUDA version torch was built with (read from torch/version.py).

- cuda_runtime: ">=12.8"
"""

from __future__ import annotations

from dataclasses import dataclass

from fp4doctor.profile.kinds.base import Context, VersionKind


@dataclass(frozen=True)
class CudaRuntime(VersionKind):
    """torch was built with a CUDA version in the range."""

    key = "cuda_runtime"
    label = "CUDA runtime"
    words = "CUDA runtime of the torch build"

    def found(self, ctx: Context) -> str | None:
        return ctx.facts.packages.torch_cuda

    def missing(self, ctx: Context) -> str:
        torch = ctx.version("torch")
        if torch is None:
            return "CUDA runtime unknown: torch is not installed"
        return f"torch {torch} has no CUDA runtime (a CPU build)"

    def packages(self) -> tuple[str, ...]:
        return ("torch",)
