"""Smoke adapters: one per way an engine can run an NVFP4 GEMM, all behind one small contract.

An adapter knows one library call and how that call wants its operands laid out; the
harness (`fp4doctor.smoke.harness`) builds the problems, poisons the output, checks the
answer and times the call. Adding a backend is adding a module here and a line in
`_REGISTRY`. This package is torch-free at import: the main process reads `ADAPTERS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

    from fp4doctor.smoke.cases import Case


class AdapterAnswer(Exception):
    """An answer an adapter words itself: a one-line reason, and the library's longer text."""

    def __init__(self, reason: str, library_error: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.library_error = library_error


class Unavailable(AdapterAnswer):
    """Not run here, with why: the library is not installed, or would have to JIT-compile
    or download kernels when that is not allowed. Becomes status `skip`."""


class Refused(AdapterAnswer):
    """The library declined the problem and the adapter can say so better than the raw
    exception (e.g. "cuDNN refused the NVFP4 graph: <its telling line>"). Becomes `fail`."""


class Adapter(Protocol):
    """One backend's NVFP4 GEMM, as the engine would call it.

    Any other exception from `load`, `bind` or the call is the library's answer and becomes
    status `fail` with its text; a crash or hang becomes `error` in the parent.
    """

    @property
    def name(self) -> str:
        """The name profiles use: "flashinfer-cudnn", "emulation", ..."""
        ...

    @property
    def supports_cpu(self) -> bool:
        """Whether it can run with no GPU (only emulation can)."""
        ...

    def load(self) -> str:
        """Import the library and return what was loaded, e.g. "flashinfer-python 0.7.4".
        Raise `Unavailable` when it is not installed."""
        ...

    def bind(self, case: Case, out: torch.Tensor) -> Callable[[], object]:
        """Lay the case's operands out as the backend wants them (on `out.device`) and return
        a call that runs the GEMM once, writing `out` (bf16 `[m, n]`, NaN-filled)."""
        ...


# name -> (module, attribute); modules are imported only in the worker.
_REGISTRY: dict[str, tuple[str, str]] = {
    "emulation": ("emulation", "ADAPTER"),
    "flashinfer-cudnn": ("flashinfer_mm_fp4", "CUDNN"),
    "flashinfer-cutlass": ("flashinfer_mm_fp4", "CUTLASS"),
    "flashinfer-trtllm": ("flashinfer_mm_fp4", "TRTLLM"),
    "flashinfer-cute-dsl": ("flashinfer_mm_fp4", "CUTE_DSL"),
    "flashinfer-b12x": ("flashinfer_mm_fp4", "B12X"),
    "cudnn-graph": ("cudnn_graph", "ADAPTER"),
    "vllm-cutlass": ("vllm_cutlass", "ADAPTER"),
    "vllm-marlin": ("vllm_marlin", "ADAPTER"),
    "torch-scaled-mm": ("torch_scaled_mm", "ADAPTER"),
    # The MoE family: each builds its own problem (`make_case`, `shapes`: fp4doctor.smoke.moe).
    "emulation-moe": ("emulation_moe", "ADAPTER"),
    "flashinfer-cutlass-moe": ("flashinfer_moe", "CUTLASS"),
    "flashinfer-trtllm-moe": ("flashinfer_trtllm_moe", "TRTLLM"),
    "flashinfer-cutedsl-moe": ("flashinfer_cutedsl_moe", "CUTE_DSL"),
}

ADAPTERS: tuple[str, ...] = tuple(_REGISTRY)
"""Every adapter name fp4doctor knows, in the order a full run tries them."""


def load_adapter(name: str) -> Adapter:
    """The adapter called `name` (imports its module, which may import torch)."""
    try:
        module, attr = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown smoke adapter {name!r} (known: {', '.join(ADAPTERS)})") from None
    adapter: Adapter = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    return adapter
