"""GPUs through NVML (`pynvml`), as the CUDA runtime of an engine on this host would number them.

NVML answers in well under a millisecond and needs no CUDA context, so nothing here starts CUDA.
NVML's failures are told apart, each with its fix, because "no GPU" has four different causes on
a real host and each wants a different action.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fp4doctor.facts import (
    NVML_DRIVER_MISMATCH,
    NVML_DRIVER_NOT_LOADED,
    NVML_ERROR,
    NVML_LIBRARY_NOT_FOUND,
    NVML_NO_GPU,
    NVML_OK,
    Gpu,
    NvmlFacts,
)

# NVML return codes (nvml.h; stable ABI). pynvml raises NVMLError subclasses carrying `.value`.
_NO_PERMISSION = 4
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_GPU_IS_LOST = 15
_LIB_RM_VERSION_MISMATCH = 18

FIX_LIBRARY_NOT_FOUND = (
    "install the NVIDIA driver (it ships libnvidia-ml.so.1); in a container, start it with "
    "GPU access (docker run --gpus all, or the NVIDIA device plugin on Kubernetes)"
)
FIX_DRIVER_NOT_LOADED = (
    "load the nvidia kernel module (sudo modprobe nvidia) or reinstall the driver; "
    "`dmesg | grep -i nvidia` tells why it did not load"
)
FIX_DRIVER_MISMATCH = (
    "reboot, or reload the nvidia kernel module, so the driver matches libnvidia-ml"
)
FIX_NO_PERMISSION = (
    "give this user read/write access to /dev/nvidia* (the video group on most distributions); "
    "in a container, pass the devices through"
)
FIX_NO_GPU = (
    "check `nvidia-smi -L`; in a container, pass the GPUs through "
    "(docker run --gpus all, NVIDIA_VISIBLE_DEVICES)"
)
FIX_ALL_HIDDEN = "unset CUDA_VISIBLE_DEVICES, or list in it the GPUs to use (indices or UUIDs)"
FIX_OTHER = "run `nvidia-smi`: it prints the driver's own explanation"


@dataclass(frozen=True)
class GpuReport:
    """What the GPU probe found: NVML's state, the visible GPUs, and notes that are not failures."""

    nvml: NvmlFacts
    gpus: list[Gpu] = field(default_factory=list)
    cuda_visible_devices: str | None = None
    notes: dict[str, str] = field(default_factory=dict)


# --- CUDA_VISIBLE_DEVICES ----------------------------------------------------------------------


def visible_devices(
    value: str | None, count: int, uuids: Sequence[str], mig_uuids: Sequence[str] = ()
) -> list[tuple[str, int]]:
    """Which devices CUDA shows, in CUDA's order, for a `CUDA_VISIBLE_DEVICES` value.

    Returns `("gpu", nvml_index)` or `("mig", position in mig_uuids)` pairs. The rules are CUDA's
    (as PyTorch's NVML-based device count models them): unset shows every GPU; entries are
    indices (read like `strtoul`, so `1gpu` is 1) or unique prefixes of `GPU-`/`MIG-` UUIDs, of
    the kind the first entry sets; the list stops at the first invalid, out-of-range or ambiguous
    entry; a repeated device hides them all; an empty string hides every GPU.
    """
    if value is None:
        return [("gpu", i) for i in range(count)]
    chosen: list[tuple[str, int]] = []
    if value.startswith(("GPU-", "MIG-")):
        prefix = value[:4]
        kind, pool = ("gpu", uuids) if prefix == "GPU-" else ("mig", mig_uuids)
        for entry in value.split(","):
            if not entry.startswith(prefix):
                break
            matches = [i for i, uuid in enumerate(pool) if uuid.startswith(entry)]
            if len(matches) != 1:
                break
            if (kind, matches[0]) in chosen:
                return []
            chosen.append((kind, matches[0]))
        return chosen
    for entry in value.split(","):
        index = _strtoul(entry.strip())
        if index < 0 or index >= count:
            break
        if ("gpu", index) in chosen:
            return []
        chosen.append(("gpu", index))
    return chosen


def _strtoul(text: str) -> int:
    """The leading unsigned integer of `text` (an optional `+`, then digits), or -1."""
    digits = text[1:] if text.startswith("+") else text
    end = 0
    while end < len(digits) and digits[end] in "0123456789":
        end += 1
    return int(digits[:end]) if end else -1


# --- NVML --------------------------------------------------------------------------------------


def probe_gpus(environ: Mapping[str, str] | None = None) -> GpuReport:
    """Ask NVML for the driver and the GPUs, filtered and renumbered by `CUDA_VISIBLE_DEVICES`."""
    env = os.environ if environ is None else environ
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    try:
        import pynvml
    except ImportError as exc:
        return GpuReport(
            NvmlFacts(
                status=NVML_ERROR,
                error=f"the nvidia-ml-py package is not importable: {exc}",
                fix="pip install nvidia-ml-py",
            ),
            cuda_visible_devices=cvd,
        )
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return GpuReport(_init_failure(exc), cuda_visible_devices=cvd)
    try:
        return _query(pynvml, cvd, env)
    except pynvml.NVMLError as exc:
        return GpuReport(
            NvmlFacts(
                status=NVML_ERROR, error=f"NVML failed while listing GPUs: {exc}", fix=FIX_OTHER
            ),
            cuda_visible_devices=cvd,
        )
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _init_failure(exc: BaseException) -> NvmlFacts:
    code = getattr(exc, "value", None)
    message = str(exc) or type(exc).__name__
    if code == _LIBRARY_NOT_FOUND:
        return NvmlFacts(
            status=NVML_LIBRARY_NOT_FOUND,
            error=f"libnvidia-ml.so.1 not found ({message}): no NVIDIA driver is visible here",
            fix=FIX_LIBRARY_NOT_FOUND,
        )
    if code == _DRIVER_NOT_LOADED:
        return NvmlFacts(
            status=NVML_DRIVER_NOT_LOADED,
            error=f"the NVIDIA kernel driver is not loaded ({message})",
            fix=FIX_DRIVER_NOT_LOADED,
        )
    if code == _LIB_RM_VERSION_MISMATCH:
        return NvmlFacts(
            status=NVML_DRIVER_MISMATCH,
            error=(
                f"the loaded kernel driver and libnvidia-ml are different versions ({message}); "
                "usually a driver upgrade without a reboot"
            ),
            fix=FIX_DRIVER_MISMATCH,
        )
    if code == _NO_PERMISSION:
        return NvmlFacts(
            status=NVML_ERROR,
            error=f"NVML may not open the GPU devices ({message})",
            fix=FIX_NO_PERMISSION,
        )
    return NvmlFacts(status=NVML_ERROR, error=f"NVML failed to start: {message}", fix=FIX_OTHER)


def _query(nvml: Any, cvd: str | None, env: Mapping[str, str]) -> GpuReport:
    notes: dict[str, str] = {}
    driver = _text(nvml.nvmlSystemGetDriverVersion())
    cuda_driver: str | None = None
    ask_cuda = getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2", None) or getattr(
        nvml, "nvmlSystemGetCudaDriverVersion", None
    )
    try:
        if ask_cuda is not None:  # an old nvidia-ml-py may lack the _v2 call
            encoded = int(ask_cuda())
            cuda_driver = f"{encoded // 1000}.{encoded % 1000 // 10}"
    except nvml.NVMLError as exc:
        notes["nvml.cuda_driver_version"] = str(exc)
    library = _loaded_library("libnvidia-ml") or getattr(
        getattr(nvml, "nvmlLib", None), "_name", None
    )
    count = int(nvml.nvmlDeviceGetCount())

    def facts(status: str, error: str | None = None, fix: str | None = None) -> NvmlFacts:
        return NvmlFacts(
            status=status,
            error=error,
            fix=fix,
            driver_version=driver,
            cuda_driver_version=cuda_driver,
            library_path=library,
        )

    if count == 0:
        return GpuReport(
            facts(NVML_NO_GPU, "NVML answers but lists no GPU", FIX_NO_GPU),
            cuda_visible_devices=cvd,
            notes=notes,
        )

    handles: list[Any] = []
    for i in range(count):
        try:
            handles.append(nvml.nvmlDeviceGetHandleByIndex(i))
        except nvml.NVMLError as exc:  # a lost or broken GPU; CUDA still counts it
            handles.append(None)
            notes[f"gpu.nvml{i}"] = f"NVML could not open this GPU: {exc}"
    uuids = [_safe_text(nvml.nvmlDeviceGetUUID, h) or "" for h in handles]
    migs: list[tuple[int, Any]] = []  # (parent nvml index, MIG handle)
    if cvd is not None and cvd.startswith("MIG-"):
        migs = _mig_devices(nvml, handles)
    mig_uuids = [_safe_text(nvml.nvmlDeviceGetUUID, h) or "" for _, h in migs]

    gpus: list[Gpu] = []
    for kind, position in visible_devices(cvd, count, uuids, mig_uuids):
        if kind == "gpu":
            nvml_index, handle, uuid = position, handles[position], uuids[position]
        else:
            nvml_index, handle = migs[position]
            uuid = mig_uuids[position]
        if handle is None:
            continue
        try:
            # A MIG instance has its parent's compute capability.
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handles[nvml_index])
            name = _text(nvml.nvmlDeviceGetName(handle))
        except nvml.NVMLError as exc:
            notes[f"gpu.nvml{nvml_index}"] = f"NVML could not describe this GPU: {exc}"
            continue
        memory: int | None
        try:
            memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) == _GPU_IS_LOST:  # fell off the bus mid-probe
                notes[f"gpu.nvml{nvml_index}"] = f"NVML could not describe this GPU: {exc}"
                continue
            memory = None  # unified-memory parts (GB10, Thor) report no dedicated memory
        gpus.append(
            Gpu(
                index=len(gpus),
                name=name,
                cc_major=int(major),
                cc_minor=int(minor),
                memory_total_mib=memory,
                uuid=uuid or None,
                nvml_index=nvml_index,
            )
        )

    if not gpus:
        return GpuReport(
            facts(
                NVML_NO_GPU,
                f"NVML sees {count} GPU(s) but CUDA_VISIBLE_DEVICES={cvd!r} hides all of them",
                FIX_ALL_HIDDEN,
            ),
            cuda_visible_devices=cvd,
            notes=notes,
        )
    if len({g.name for g in gpus}) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        notes["gpu.order"] = (
            "these GPUs differ and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers them "
            "fastest first, so an engine's device indices may not follow the order listed here"
        )
    return GpuReport(facts(NVML_OK), gpus, cvd, notes)


def _mig_devices(nvml: Any, handles: Sequence[Any]) -> list[tuple[int, Any]]:
    migs: list[tuple[int, Any]] = []
    for index, handle in enumerate(handles):
        if handle is None:
            continue
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
            if not current:
                continue
            for slot in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
                try:
                    migs.append((index, nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)))
                except nvml.NVMLError:
                    continue  # an empty slot
        except nvml.NVMLError:
            continue  # MIG not supported on this GPU
    return migs


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _safe_text(fn: Any, handle: Any) -> str | None:
    try:
        return _text(fn(handle))
    except Exception:
        return None


def _loaded_library(fragment: str) -> str | None:
    """The path of a shared library this process has mapped whose name contains `fragment`."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                parts = line.split(None, 5)
                if len(parts) == 6 and fragment in parts[5]:
                    return parts[5].strip()
    except OSError:
        return None
    return None
