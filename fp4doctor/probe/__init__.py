"""Probe this host into `HostFacts`, without importing torch, flashinfer or cudnn.

Each part is guarded: a probe that fails becomes a reason in `probe_errors` (or the part's own
`error` fields), never an exception, so a half-broken host still gets a full report.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from fp4doctor import __version__
from fp4doctor.coldstart.probe import probe_cold_start, rule_modules
from fp4doctor.facts import (
    CompiledArchs,
    CudnnFacts,
    HostFacts,
    NvmlFacts,
    PackageFacts,
    ToolchainFacts,
    canonical_name,
)
from fp4doctor.probe.archs import engine_modules, probe_compiled_archs
from fp4doctor.probe.cudart import probe_cudart
from fp4doctor.probe.cudnn import probe_cudnn
from fp4doctor.probe.environment import probe_environment
from fp4doctor.probe.gpus import GpuReport, probe_gpus
from fp4doctor.probe.packages import PACKAGES, probe_packages
from fp4doctor.probe.toolchain import probe_toolchain
from fp4doctor.probe.triton import probe_triton_ptxas

__all__ = ["in_background", "probe_host", "with_compiled_archs", "with_packages"]

T = TypeVar("T")


def probe_host(
    environ: Mapping[str, str] | None = None,
    packages: Iterable[str] = (),
    modules: Iterable[str] = (),
) -> HostFacts:
    """Everything the rules need to know about this host, as seen under `environ`; `packages`
    adds the distributions a profile reads to the core list, `modules` the CUDA modules whose
    compiled architectures its rules check (`DIST/PATH`, see probe/archs.py)."""
    env = os.environ if environ is None else environ
    errors: dict[str, str] = {}

    def guarded(name: str, probe: Callable[[], T], fallback: T) -> T:
        try:
            return probe()
        except Exception as exc:  # the guard: a broken probe is a fact, not a crash
            errors[name] = f"{type(exc).__name__}: {exc}"
            return fallback

    # Subprocesses run beside the Python work: `nvcc --version` and Triton's `ptxas --version`
    # while the packages are read, the cuDNN reader (it needs the packages) while NVML answers.
    toolchain_pending = in_background(lambda: with_triton(probe_toolchain(env), env))
    wanted = list(dict.fromkeys([*PACKAGES, *packages]))
    found = guarded("packages", lambda: probe_packages(names=wanted), PackageFacts())
    cudnn_pending = in_background(lambda: probe_cudnn(env, found))
    # The profile's modules, and those the installed engine's shipped profile names, so that
    # `probe --json` carries what `check` reads (usually none without an engine: no thread then).
    no_modules: list[str] = []
    named = guarded("compiled_archs", lambda: engine_modules(found.versions), no_modules)
    wanted_modules = list(dict.fromkeys([*modules, *named]))
    archs_pending = (
        in_background(lambda: probe_compiled_archs(wanted_modules))
        if wanted_modules
        else lambda: probe_compiled_archs(())
    )
    gpu_report = guarded(
        "gpus",
        lambda: probe_gpus(env),
        GpuReport(NvmlFacts(), cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES")),
    )
    errors.update(gpu_report.notes)
    no_variables: dict[str, str] = {}
    variables = guarded("environment", lambda: probe_environment(env), no_variables)
    cudnn = guarded("cudnn", cudnn_pending, CudnnFacts())
    toolchain = guarded("toolchain", toolchain_pending, ToolchainFacts())
    no_archs: dict[str, CompiledArchs] = {}
    compiled_archs = guarded("compiled_archs", archs_pending, no_archs)
    cudart = guarded("cudart", lambda: probe_cudart(env), None)
    cold_start = guarded("cold_start", lambda: probe_cold_start(env, found, rule_modules()), None)

    return HostFacts(
        fp4doctor_version=__version__,
        captured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        hostname=guarded("hostname", lambda: os.uname().nodename, None),
        python_version=".".join(str(part) for part in sys.version_info[:3]),
        platform=guarded("platform", _platform, None),
        nvml=gpu_report.nvml,
        gpus=gpu_report.gpus,
        cuda_visible_devices=gpu_report.cuda_visible_devices,
        packages=found,
        cudnn=cudnn,
        toolchain=toolchain,
        env=variables,
        probe_errors=errors,
        compiled_archs=compiled_archs,
        cudart=cudart,
        cold_start=cold_start,
    )


def with_triton(toolchain: ToolchainFacts, env: Mapping[str, str]) -> ToolchainFacts:
    """The toolchain facts with the ptxas Triton would use (nothing when Triton is absent)."""
    found = probe_triton_ptxas(env)
    if found is None:
        return toolchain
    errors = dict(toolchain.errors)
    if found.error:
        errors["triton_ptxas"] = found.error
    return dataclasses.replace(
        toolchain,
        triton_ptxas_path=found.path,
        triton_ptxas_version=found.version,
        triton_ptxas_blackwell_path=found.blackwell_path,
        triton_ptxas_blackwell_version=found.blackwell_version,
        errors=errors,
    )


def with_packages(host: HostFacts, names: Iterable[str]) -> HostFacts:
    """`host` with the versions of `names` it did not look up yet (this host only)."""
    missing = [n for n in names if canonical_name(n) not in host.packages.versions]
    missing = [n for n in missing if canonical_name(n) not in host.packages.errors]
    if not missing:
        return host
    more = probe_packages(names=missing)
    merged = dataclasses.replace(
        host.packages,
        versions={**host.packages.versions, **more.versions},
        errors={**host.packages.errors, **more.errors},
    )
    return dataclasses.replace(host, packages=merged)


def with_compiled_archs(host: HostFacts, modules: Iterable[str]) -> HostFacts:
    """`host` with the compiled architectures of `modules` it did not scan yet (this host only)."""
    missing = [m for m in modules if m not in host.compiled_archs]
    if not missing:
        return host
    try:
        more = probe_compiled_archs(missing)
    except Exception as exc:  # the guard, as in probe_host
        errors = {**host.probe_errors, "compiled_archs": f"{type(exc).__name__}: {exc}"}
        return dataclasses.replace(host, probe_errors=errors)
    return dataclasses.replace(host, compiled_archs={**host.compiled_archs, **more})


def in_background(work: Callable[[], T]) -> Callable[[], T]:
    """Start `work` on a thread; the returned function waits for it and returns or raises."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the caller's guard by `result`
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="fp4doctor-probe", daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        value: T = outcome["value"]
        return value

    return result


def _platform() -> str:
    """Like `platform.platform()` ("Linux-6.8.0-x86_64-with-glibc2.39"), without its slow parts."""
    uname = os.uname()
    text = f"{uname.sysname}-{uname.release}-{uname.machine}"
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.39"
    except (ValueError, OSError):
        libc = None
    if libc:
        text += "-with-" + libc.replace(" ", "")
    return text
