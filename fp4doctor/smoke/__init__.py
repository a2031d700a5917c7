"""The live stage: a small NVFP4 GEMM per backend adapter and GPU, checked and timed.

Each GPU gets its own worker process (`fp4doctor.smoke.worker`), so a segfault, an abort,
a CUDA fault or a hang in a vendor library becomes an `error` result instead of taking the
doctor down. Results stream back as JSON lines. This package is torch-free at import: the
main process never imports torch; only workers do.

    run_smoke(["emulation", "flashinfer-cudnn"], gpus=[0, 1]) -> list[SmokeResult]
"""

from __future__ import annotations

import importlib.util

from fp4doctor.smoke.adapters import ADAPTERS
from fp4doctor.smoke.result import SmokeResult
from fp4doctor.smoke.runner import Prestarted, SmokeInterrupted, run_smoke

__all__ = [
    "ADAPTERS",
    "Prestarted",
    "SmokeInterrupted",
    "SmokeResult",
    "run_smoke",
    "torch_available",
]


def torch_available() -> bool:
    """Whether torch is installed (found, not imported: importing it costs seconds)."""
    return importlib.util.find_spec("torch") is not None
