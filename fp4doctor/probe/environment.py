"""The environment variables that can change which FP4 path an engine takes.

Only names on an allowlist are recorded, and the value of any name that looks like a secret is
replaced by `facts.REDACTED`: a facts snapshot is meant to be pasted into tickets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fp4doctor.facts import REDACTED

PREFIXES: tuple[str, ...] = (
    "VLLM_",
    "SGLANG_",
    "FLASHINFER_",
    "CUDNN_",
    "TRTLLM_",
    "TLLM_",
    "CUDA_",
    "NVCC_",
    "FP4DOCTOR_",
)
NAMES: frozenset[str] = frozenset(
    {
        "TORCH_CUDA_ARCH_LIST",  # the archs a JIT build targets
        "LD_LIBRARY_PATH",  # which libcudnn / libcudart the loaders find first
        "LD_PRELOAD",
        "MAX_JOBS",  # FlashInfer's and torch's JIT parallelism
        "PYTORCH_NVML_BASED_CUDA_CHECK",
        # The container runtime's GPU hand-over; NVIDIA_REQUIRE_CUDA and friends are left out
        # (a page of driver-brand constraints, nothing an FP4 backend depends on).
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
    }
)
SECRET_MARKERS: tuple[str, ...] = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
)


def is_relevant(name: str) -> bool:
    return name in NAMES or name.startswith(PREFIXES)


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def probe_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The relevant variables, sorted by name, with secret-looking values redacted."""
    env = os.environ if environ is None else environ
    return {
        name: REDACTED if looks_secret(name) else env[name]
        for name in sorted(env)
        if is_relevant(name)
    }
