"""FlashInfer `mm_fp4` with an explicit `backend=`: cudnn, cutlass, trtllm, cute-dsl, b12x.

The call is the one vLLM makes (`flashinfer_scaled_fp4_mm`, reference
engines-nvfp4-backend-selection.md §1.5) and FlashInfer's tests make
(flashinfer-cudnn-fp4.md §1.2–1.3, §3.1), written so it is valid for every release since
v0.2.9: `alpha` and `out_dtype` positional (required before 0.4.0), `use_nvfp4` never passed
(absent before 0.4.0, default True since), `use_8x4_sf_layout` only when set.

- a: packed uint8 `[m, k/2]`; b: the `[n, k/2]` weight passed as `b.T`.
- Scales: uint8 views of the 128x4 swizzled buffers, reshaped `[round_up(rows, 128),
  round_up(k/16, 4)]`; the weight's passed transposed.
- trtllm: the weight and its scales shuffled (`shuffle_matrix_a` / `shuffle_matrix_sf_a`,
  epilogue_tile_m=128) and, for m <= 32, A's scales in the 8x4 layout with
  `use_8x4_sf_layout=True`, as vLLM does from 0.15; bf16 output (the only one trtllm takes).
- alpha: a float32 1-element tensor, 1/(gs_a·gs_b). Autotuning off.

Operands come from fp4doctor.nvfp4, never from FlashInfer's quantize kernels, so a GEMM
failure is not a quantize-module JIT failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from fp4doctor.smoke import nvfp4
from fp4doctor.smoke.adapters import Refused, Unavailable
from fp4doctor.smoke.cases import Case
from fp4doctor.smoke.errors import LIBRARY_ERROR_CHARS, exception_text, telling_line, trim

# FlashInfer's texts when FLASHINFER_DISABLE_JIT / FLASHINFER_NO_DOWNLOAD stop a kernel load.
_NEEDS_BUILD_MARKERS = ("FLASHINFER_DISABLE_JIT", "FLASHINFER_NO_DOWNLOAD", "refusing to download")
_TRTLLM_8X4_MAX_M = 32  # vLLM: use_8x4_sf_layout = backend == "trtllm" and m <= 32


def _listed_backends(mm_fp4: Any) -> tuple[str, ...] | None:
    """The backends the installed `mm_fp4` declares in its `backend` Literal, if readable."""
    try:
        annotation = inspect.signature(mm_fp4).parameters["backend"].annotation
    except (KeyError, TypeError, ValueError):
        return None
    if isinstance(annotation, str):  # postponed annotations: 'Literal["cudnn", ...]'
        return tuple(re.findall(r"""['"]([^'"]+)['"]""", annotation)) or None
    args = typing.get_args(annotation)
    return tuple(a for a in args if isinstance(a, str)) or None


def _autotune_off(flashinfer: Any) -> contextlib.AbstractContextManager[object]:
    autotune = getattr(flashinfer, "autotune", None)
    if autotune is None:
        with contextlib.suppress(ImportError):
            autotune = importlib.import_module("flashinfer.autotuner").autotune
    return autotune(False) if autotune is not None else contextlib.nullcontext()


@contextlib.contextmanager
def flashinfer_call(flashinfer: Any) -> Iterator[None]:
    """One call into FlashInfer as every FlashInfer adapter makes it: the autotuner off, and a
    refusal to JIT-compile or download kernels (offline unless --allow-jit) turned into
    `Unavailable`, a skip, since it says nothing about the kernel."""
    try:
        with _autotune_off(flashinfer):
            yield
    except Exception as exc:
        text = exception_text(exc)
        if type(exc).__name__ == "MissingJITCacheError" or any(
            m in text for m in _NEEDS_BUILD_MARKERS
        ):
            raise Unavailable(
                "needs a JIT compile or a kernel download, not allowed without "
                f"--allow-jit: {telling_line(text)}",
                trim(text, LIBRARY_ERROR_CHARS),
            ) from exc
        raise


@dataclass(frozen=True)
class FlashInferMmFp4:
    name: str
    backend: str  # mm_fp4's backend= string
    supports_cpu: bool = False

    def _flashinfer(self) -> Any:
        return importlib.import_module("flashinfer")

    def load(self) -> str:
        if importlib.util.find_spec("flashinfer") is None:
            raise Unavailable("flashinfer-python is not installed")
        flashinfer = self._flashinfer()
        label = f"flashinfer-python {getattr(flashinfer, '__version__', '?')}"
        mm_fp4 = getattr(flashinfer, "mm_fp4", None)
        if mm_fp4 is None:
            raise Refused(f"{label} has no mm_fp4 (added in 0.2.9)")
        listed = _listed_backends(mm_fp4)
        if listed is not None and self.backend not in listed:
            raise Refused(
                f"{label} mm_fp4 has no backend {self.backend!r} (it lists {', '.join(listed)})"
            )
        return label

    def bind(self, case: Case, out: torch.Tensor) -> Callable[[], object]:
        flashinfer = self._flashinfer()
        mm_fp4 = flashinfer.mm_fp4
        a, b = case.a, case.b
        a_packed, b_packed = a.packed, b.packed
        a_sf = a.scales_128x4()
        kwargs: dict[str, Any] = {"out": out, "block_size": 16, "backend": self.backend}
        if self.backend == "trtllm":
            b_packed = nvfp4.shuffle_matrix_a(b.packed, 128)
            b_sf = nvfp4.scale_grid(nvfp4.shuffle_matrix_sf_a(b.scales, 128), case.n, case.k // 16)
            if case.m <= _TRTLLM_8X4_MAX_M:
                a_sf = nvfp4.scale_grid(
                    nvfp4.swizzle_8x4(a.scales), case.m, case.k // 16, tile_rows=8
                )
                kwargs["use_8x4_sf_layout"] = True
        else:
            b_sf = b.scales_128x4()
        a_sf, b_sf = a_sf.view(torch.uint8), b_sf.view(torch.uint8)  # mm_fp4 takes the bytes
        alpha = torch.tensor([case.alpha], dtype=torch.float32, device=out.device)

        def call() -> object:
            with flashinfer_call(flashinfer):
                b_t, b_sf_t = b_packed.T, b_sf.T
                return mm_fp4(a_packed, b_t, a_sf, b_sf_t, alpha, torch.bfloat16, **kwargs)

        return call


CUDNN = FlashInferMmFp4("flashinfer-cudnn", "cudnn")
CUTLASS = FlashInferMmFp4("flashinfer-cutlass", "cutlass")
TRTLLM = FlashInferMmFp4("flashinfer-trtllm", "trtllm")
CUTE_DSL = FlashInferMmFp4("flashinfer-cute-dsl", "cute-dsl")
B12X = FlashInferMmFp4("flashinfer-b12x", "b12x")
