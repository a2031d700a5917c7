"""`nvcc: SPEC` (or `nvcc: true`, any version) — the nvcc FlashInfer's JIT would use.

- nvcc: ">=12.8"
"""

from __future__ import annotations

from dataclasses import dataclass

from fp4doctor.profile.kinds.base import Context, VersionKind


@dataclass(frozen=True)
class Nvcc(VersionKind):
    """The nvcc FlashInfer's JIT would use is at a version in the range."""

    key = "nvcc"
    label = "nvcc"
    words = "nvcc"
    present_only = True

    def found(self, ctx: Context) -> str | None:
        return ctx.facts.toolchain.nvcc_version

    def missing(self, ctx: Context) -> str:
        tc = ctx.facts.toolchain
        if tc.nvcc_path:
            return f"nvcc at {tc.nvcc_path} did not report a version"
        return "no nvcc found (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)"

    def default_fix(self, ctx: Context) -> str | None:
        return "install the CUDA toolkit (nvcc) and set CUDA_HOME to it"
