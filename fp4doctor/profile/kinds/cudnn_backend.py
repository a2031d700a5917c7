"""`cudnn_backend: SPEC` — the cuDNN library that cudnn-frontend would load (`cudnnGetVersion`).

- cudnn_backend: ">=9.10.2"
"""

from __future__ import annotations

from dataclasses import dataclass

from fp4doctor.profile.kinds.base import Context, VersionKind


@dataclass(frozen=True)
class CudnnBackend(VersionKind):
    """The cuDNN library cudnn-frontend loads is at a version in the range."""

    key = "cudnn_backend"
    label = "cuDNN backend"
    words = "cuDNN library (the one cudnn-frontend loads)"

    def found(self, ctx: Context) -> str | None:
        return ctx.facts.cudnn.frontend.version_text

    def missing(self, ctx: Context) -> str:
        lib = ctx.facts.cudnn.frontend
        if lib.error:
            return f"no usable libcudnn: {lib.error}"
        return "no libcudnn found where cudnn-frontend looks (nvidia/cudnn/lib, then libcudnn.so.9)"
