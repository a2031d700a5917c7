"""The ptxas that Triton will assemble its kernels with, and its CUDA release, without importing
Triton.

Triton runs its own bundled ptxas (`triton/backends/nvidia/bin/ptxas`) unless
`TRITON_PTXAS_PATH` names another; Triton 3.3 and 3.6+ bundle a second one for compute
capability 10.0 and newer (`ptxas-blackwell`, overridden by `TRITON_PTXAS_BLACKWELL_PATH`), and
3.4-3.5 use the one ptxas for every GPU (triton/backends/nvidia/compiler.py `get_ptxas`). A ptxas
that predates a GPU's architecture refuses it ("Value 'sm_121a' is not defined for option
'gpu-name'") at the first kernel Triton compiles.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

PTXAS_TIMEOUT_S = 10.0
_RELEASE = re.compile(r"release (\d+\.\d+)")


@dataclass(frozen=True)
class TritonPtxas:
    """The two ptxas Triton may use: for GPUs below compute capability 10.0, and from it."""

    path: str | None = None
    version: str | None = None
    blackwell_path: str | None = None
    blackwell_version: str | None = None
    error: str | None = None


def probe_triton_ptxas(
    environ: Mapping[str, str] | None = None, timeout: float = PTXAS_TIMEOUT_S
) -> TritonPtxas | None:
    """None when Triton is not installed."""
    env = os.environ if environ is None else environ
    spec = importlib.util.find_spec("triton")  # finds the package; runs none of its code
    if spec is None or not spec.submodule_search_locations:
        return None
    bin_dir = os.path.join(next(iter(spec.submodule_search_locations)), "backends", "nvidia", "bin")
    plain = env.get("TRITON_PTXAS_PATH") or os.path.join(bin_dir, "ptxas")
    bundled_blackwell = os.path.join(bin_dir, "ptxas-blackwell")
    blackwell = env.get("TRITON_PTXAS_BLACKWELL_PATH") or (
        bundled_blackwell if os.path.exists(bundled_blackwell) else plain
    )
    versions: dict[str, str | None] = {}
    errors: list[str] = []
    # Both at once: each is a large binary that takes tens of milliseconds to start.
    started = {path: _start(path) for path in dict.fromkeys((plain, blackwell))}
    for path, proc in started.items():
        version, problem = _release(path, proc, timeout)
        versions[path] = version
        if problem:
            errors.append(problem)
    return TritonPtxas(
        path=plain,
        version=versions[plain],
        blackwell_path=blackwell,
        blackwell_version=versions[blackwell],
        error="; ".join(errors) or None,
    )


def _start(path: str) -> subprocess.Popen[str] | str:
    """`path --version` started, or why it could not be."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return f"{path} is not an executable file"
    try:
        return subprocess.Popen(
            [path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
    except OSError as exc:
        return f"{path} --version failed: {exc}"


def _release(
    path: str, proc: subprocess.Popen[str] | str, timeout: float
) -> tuple[str | None, str | None]:
    """("12.8", None) from a started `ptxas --version`, or (None, why not)."""
    if isinstance(proc, str):
        return None, proc
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, f"{path} --version did not answer within {timeout:g} s"
    match = _RELEASE.search(out or "")
    if match is None:
        return None, f"{path} --version printed no CUDA release"
    return match.group(1), None
