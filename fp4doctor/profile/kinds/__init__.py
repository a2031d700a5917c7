"""Requirement kinds: one module each, registered here by their YAML key.

Adding a kind is one new module (a `Kind` subclass: parse, check, describe, default fix, the
packages it reads) and a line below; the loader, the rules, the docs and the probe find it here.
"""

from __future__ import annotations

from fp4doctor.profile.kinds.all_of import AllOf
from fp4doctor.profile.kinds.any_of import AnyOf
from fp4doctor.profile.kinds.base import Check, Context, Kind
from fp4doctor.profile.kinds.compiled_arch import CompiledArch
from fp4doctor.profile.kinds.compute_capability import ComputeCapability
from fp4doctor.profile.kinds.cuda_driver import CudaDriver
from fp4doctor.profile.kinds.cuda_runtime import CudaRuntime
from fp4doctor.profile.kinds.cudart_loader import CudartLoader
from fp4doctor.profile.kinds.cudnn_backend import CudnnBackend
from fp4doctor.profile.kinds.engine_arg import EngineArg
from fp4doctor.profile.kinds.env import Env
from fp4doctor.profile.kinds.ninja import Ninja
from fp4doctor.profile.kinds.nvcc import Nvcc
from fp4doctor.profile.kinds.nvcc_on_path import NvccOnPath
from fp4doctor.profile.kinds.package import Package
from fp4doctor.profile.kinds.same_version import SameVersion
from fp4doctor.profile.kinds.toolchain_arch import ToolchainArch
from fp4doctor.profile.kinds.use import Use

__all__ = ["KINDS", "Check", "Context", "Kind", "get"]

KINDS: dict[str, type[Kind]] = {
    kind.key: kind
    for kind in (
        Package,
        ComputeCapability,
        CudnnBackend,
        CompiledArch,
        CudaRuntime,
        CudaDriver,
        CudartLoader,
        Nvcc,
        NvccOnPath,
        Ninja,
        SameVersion,
        Env,
        EngineArg,
        ToolchainArch,
        AnyOf,
        AllOf,
        Use,
    )
}


def get(key: str) -> type[Kind]:
    """The kind registered under `key`; KeyError lists the valid keys."""
    try:
        return KINDS[key]
    except KeyError:
        raise KeyError(f"unknown requirement kind {key!r} (valid: {', '.join(KINDS)})") from None
