"""The GPU probe: NVML's states told apart, and CUDA_VISIBLE_DEVICES read as CUDA reads it.

The real-host tests run against this machine's NVML as it is. NVML states that cannot be caused
on a CPU host (driver not loaded, version mismatch, GPUs present) are tested through a fake
`pynvml` module; each such test says so in its docstring ("fake: ...").
"""

from __future__ import annotations

import ctypes
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fp4doctor import facts
from fp4doctor.probe import gpus as gpus_probe
from fp4doctor.probe.gpus import probe_gpus, visible_devices


def nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


# --- this host, for real -----------------------------------------------------------------------


def test_real_host_without_nvml_reports_library_not_found_with_its_fix() -> None:
    if nvml_library_present():
        pytest.skip("this host has libnvidia-ml.so.1")
    report = probe_gpus({})
    assert report.nvml.status == facts.NVML_LIBRARY_NOT_FOUND
    assert report.nvml.fix == gpus_probe.FIX_LIBRARY_NOT_FOUND
    assert "libnvidia-ml.so.1" in (report.nvml.error or "")
    assert report.gpus == []


def test_real_host_records_cuda_visible_devices_even_without_nvml() -> None:
    assert probe_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}).cuda_visible_devices == "0,1"
    assert probe_gpus({}).cuda_visible_devices is None


@pytest.mark.gpu
def test_real_gpus_are_described() -> None:
    report = probe_gpus({})
    assert report.nvml.status == facts.NVML_OK
    assert report.gpus
    assert re.fullmatch(r"\d+\.\d+", report.nvml.cuda_driver_version or "")
    assert report.nvml.driver_version
    for position, gpu in enumerate(report.gpus):
        assert gpu.index == position
        assert gpu.cc_major >= 3
        assert (gpu.uuid or "").startswith("GPU-")


@pytest.mark.gpu
def test_real_gpus_hidden_by_an_empty_cuda_visible_devices() -> None:
    report = probe_gpus({"CUDA_VISIBLE_DEVICES": ""})
    assert report.gpus == []
    assert report.nvml.status == facts.NVML_NO_GPU
    assert report.nvml.fix == gpus_probe.FIX_ALL_HIDDEN


# --- a fake pynvml, for what this host cannot show ---------------------------------------------


class FakeNVMLError(Exception):
    """Stands in for pynvml.NVMLError: carries NVML's return code as `.value`."""

    MESSAGES: ClassVar[dict[int, str]] = {
        3: "Not Supported",
        4: "Insufficient Permissions",
        9: "Driver Not Loaded",
        12: "NVML Shared Library Not Found",
        15: "GPU is lost",
        18: "RM has detected an NVML/RM version mismatch.",
    }

    def __init__(self, value: int) -> None:
        super().__init__(self.MESSAGES.get(value, f"NVML error {value}"))
        self.value = value


@dataclass
class FakeGpu:
    name: str
    cc: tuple[int, int]
    memory_mib: int | None
    uuid: str
    lost: bool = False
    migs: list[FakeGpu] = field(default_factory=list)


B200 = ("NVIDIA B200", (10, 0), 183359)
H100 = ("NVIDIA H100 80GB HBM3", (9, 0), 81559)


def fake_gpus(*specs: tuple[str, tuple[int, int], int | None]) -> list[FakeGpu]:
    return [
        FakeGpu(name, cc, mem, f"GPU-{i:08x}-1111-2222-3333-44444444444{i}")
        for i, (name, cc, mem) in enumerate(specs)
    ]


def fake_pynvml(
    gpus: list[FakeGpu] | None = None,
    *,
    init_error: int | None = None,
    count_error: int | None = None,
    driver: str | bytes = "570.172.08",
    cuda: int = 12080,
) -> types.ModuleType:
    """A module with the slice of pynvml's API the probe uses, over `gpus`."""
    listed = list(gpus or [])
    module = types.ModuleType("pynvml")
    calls: list[str] = []

    def fail_if(condition: bool, code: int) -> None:
        if condition:
            raise FakeNVMLError(code)

    def init() -> None:
        calls.append("init")
        fail_if(init_error is not None, init_error or 0)

    def count() -> int:
        fail_if(count_error is not None, count_error or 0)
        return len(listed)

    def handle(index: int) -> FakeGpu:
        fail_if(listed[index].lost, 15)
        return listed[index]

    def memory(gpu: FakeGpu) -> Any:
        fail_if(gpu.memory_mib is None, 3)
        return types.SimpleNamespace(total=(gpu.memory_mib or 0) * 1024 * 1024, free=0, used=0)

    def mig_mode(gpu: FakeGpu) -> tuple[int, int]:
        return (1, 1) if gpu.migs else (0, 0)

    def mig_handle(gpu: FakeGpu, slot: int) -> FakeGpu:
        fail_if(slot >= len(gpu.migs), 6)
        return gpu.migs[slot]

    functions: dict[str, Callable[..., Any]] = {
        "nvmlInit": init,
        "nvmlShutdown": lambda: calls.append("shutdown"),
        "nvmlSystemGetDriverVersion": lambda: driver,
        "nvmlSystemGetCudaDriverVersion_v2": lambda: cuda,
        "nvmlDeviceGetCount": count,
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetUUID": lambda gpu: gpu.uuid,
        "nvmlDeviceGetName": lambda gpu: gpu.name.encode(),  # older pynvml returns bytes
        "nvmlDeviceGetCudaComputeCapability": lambda gpu: gpu.cc,
        "nvmlDeviceGetMemoryInfo": memory,
        "nvmlDeviceGetMigMode": mig_mode,
        "nvmlDeviceGetMaxMigDeviceCount": lambda gpu: 7,
        "nvmlDeviceGetMigDeviceHandleByIndex": mig_handle,
    }
    for name, function in functions.items():
        setattr(module, name, function)
    module.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    module.calls = calls  # type: ignore[attr-defined]
    return module


@pytest.fixture
def install_fake(monkeypatch: pytest.MonkeyPatch) -> Callable[[types.ModuleType], types.ModuleType]:
    def install(module: types.ModuleType) -> types.ModuleType:
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install


@pytest.mark.parametrize(
    ("code", "status", "fix"),
    [
        (12, facts.NVML_LIBRARY_NOT_FOUND, gpus_probe.FIX_LIBRARY_NOT_FOUND),
        (9, facts.NVML_DRIVER_NOT_LOADED, gpus_probe.FIX_DRIVER_NOT_LOADED),
        (18, facts.NVML_DRIVER_MISMATCH, gpus_probe.FIX_DRIVER_MISMATCH),
        (4, facts.NVML_ERROR, gpus_probe.FIX_NO_PERMISSION),
        (999, facts.NVML_ERROR, gpus_probe.FIX_OTHER),
    ],
)
def test_nvml_init_failures_are_told_apart(
    install_fake: Callable[[types.ModuleType], types.ModuleType], code: int, status: str, fix: str
) -> None:
    """fake: this host cannot unload a driver, mismatch it, or deny device access."""
    install_fake(fake_pynvml(init_error=code))
    report = probe_gpus({})
    assert report.nvml.status == status
    assert report.nvml.fix == fix
    assert FakeNVMLError.MESSAGES.get(code, "NVML error") in (report.nvml.error or "")
    assert report.gpus == []


def test_mismatch_fix_says_reboot_or_reload(
    install_fake: Callable[[types.ModuleType], types.ModuleType],
) -> None:
    """fake: a driver/library version mismatch cannot be caused on this host."""
    install_fake(fake_pynvml(init_error=18))
    fix = probe_gpus({}).nvml.fix or ""
    assert "reboot" in fix
    assert "nvidia kernel module" in fix


def test_nvml_with_no_gpu(install_fake: Callable[[types.ModuleType], types.ModuleType]) -> None:
    """fake: no GPU on this host, and no driver to report zero of them."""
    module = install_fake(fake_pynvml([]))
    report = probe_gpus({})
    assert report.nvml.status == facts.NVML_NO_GPU
    assert report.nvml.fix == gpus_probe.FIX_NO_GPU
    assert report.nvml.driver_version == "570.172.08"
    assert module.calls == ["init", "shutdown"]


def test_gpus_are_described(install_fake: Callable[[types.ModuleType], types.ModuleType]) -> None:
    """fake: no GPU on this host."""
    module = install_fake(fake_pynvml(fake_gpus(B200, B200), driver=b"580.95.05", cuda=13000))
    report = probe_gpus({})
    assert report.nvml.status == facts.NVML_OK
    assert report.nvml.driver_version == "580.95.05"
    assert report.nvml.cuda_driver_version == "13.0"
    assert [(g.index, g.nvml_index, g.name, g.cc, g.memory_total_mib) for g in report.gpus] == [
        (0, 0, "NVIDIA B200", 100, 183359),
        (1, 1, "NVIDIA B200", 100, 183359),
    ]
    assert report.gpus[1].uuid == module.nvmlDeviceGetUUID(module.nvmlDeviceGetHandleByIndex(1))
    assert module.calls == ["init", "shutdown"]
    assert report.notes == {}


@pytest.mark.parametrize(("encoded", "text"), [(12080, "12.8"), (12090, "12.9"), (13000, "13.0")])
def test_cuda_driver_version_text(
    install_fake: Callable[[types.ModuleType], types.ModuleType], encoded: int, text: str
) -> None:
    """fake: no GPU on this host."""
    install_fake(fake_pynvml(fake_gpus(B200), cuda=encoded))
    assert probe_gpus({}).nvml.cuda_driver_version == text


def test_unified_memory_has_no_size(
    install_fake: Callable[[types.ModuleType], types.ModuleType],
) -> None:
    """fake: no GB10 (unified memory; NVML answers Not Supported) on this host."""
    install_fake(fake_pynvml(fake_gpus(("NVIDIA GB10", (12, 1), None))))
    (gpu,) = probe_gpus({}).gpus
    assert gpu.memory_total_mib is None
    assert gpu.cc == 121


def test_lost_gpu_is_a_note_not_a_crash(
    install_fake: Callable[[types.ModuleType], types.ModuleType],
) -> None:
    """fake: no GPU on this host, let alone a lost one."""
    listed = fake_gpus(B200, B200)
    listed[0].lost = True
    install_fake(fake_pynvml(listed))
    report = probe_gpus({})
    assert [g.nvml_index for g in report.gpus] == [1]
    assert report.gpus[0].index == 0
    assert "GPU is lost" in report.notes["gpu.nvml0"]


def test_listing_failure_is_an_error_value(
    install_fake: Callable[[types.ModuleType], types.ModuleType],
) -> None:
    """fake: no GPU on this host."""
    module = install_fake(fake_pynvml(fake_gpus(B200), count_error=999))
    report = probe_gpus({})
    assert report.nvml.status == facts.NVML_ERROR
    assert "NVML error 999" in (report.nvml.error or "")
    assert module.calls == ["init", "shutdown"]


def test_missing_pynvml_is_an_error_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    report = probe_gpus({})
    assert report.nvml.status == facts.NVML_ERROR
    assert report.nvml.fix == "pip install nvidia-ml-py"


def test_mixed_gpus_warn_about_cuda_device_order(
    install_fake: Callable[[types.ModuleType], types.ModuleType],
) -> None:
    """fake: no B200 or H100 on this host."""
    install_fake(fake_pynvml(fake_gpus(B200, H100)))
    report = probe_gpus({})
    assert [g.cc for g in report.gpus] == [100, 90]
    assert "CUDA_DEVICE_ORDER" in report.notes["gpu.order"]
    assert "gpu.order" not in probe_gpus({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).notes


# --- CUDA_VISIBLE_DEVICES ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "nvml_indices"),
    [
        (None, [0, 1, 2, 3]),
        ("", []),
        ("2,0", [2, 0]),
        ("1, 3", [1, 3]),
        ("1,7,2", [1]),  # out of range stops the list
        ("1,x,2", [1]),  # invalid stops the list
        ("-1,0", []),
        ("0,0", []),  # a repeated device hides all
        ("1gpu,2ampere", [1, 2]),  # strtoul
        ("+3", [3]),
        ("GPU-00000002", [2]),
        ("GPU-00000003-1111,GPU-00000001", [3, 1]),
        ("GPU-0000000", []),  # ambiguous prefix
        ("GPU-00000001,GPU-ffff,GPU-00000002", [1]),  # unknown UUID stops the list
        ("GPU-00000001,0", [1]),  # the first entry sets the kind
        ("0,GPU-00000001", [0]),
    ],
)
def test_cuda_visible_devices(
    install_fake: Callable[[types.ModuleType], types.ModuleType],
    value: str | None,
    nvml_indices: list[int],
) -> None:
    """fake: no GPU on this host."""
    install_fake(fake_pynvml(fake_gpus(B200, B200, B200, B200)))
    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    report = probe_gpus(env)
    assert [g.nvml_index for g in report.gpus] == nvml_indices
    assert [g.index for g in report.gpus] == list(range(len(nvml_indices)))
    assert report.cuda_visible_devices == value
    if not nvml_indices:
        assert report.nvml.status == facts.NVML_NO_GPU
        assert report.nvml.fix == gpus_probe.FIX_ALL_HIDDEN


def test_cuda_visible_devices_selects_a_mig_instance(
    install_fake: Callable[[types.ModuleType], types.ModuleType],
) -> None:
    """fake: no MIG-capable GPU on this host."""
    listed = fake_gpus(H100, H100)
    listed[1].migs = [
        FakeGpu("NVIDIA H100 80GB HBM3 MIG 3g.40gb", (0, 0), 40192, "MIG-aaaa0000-1111"),
        FakeGpu("NVIDIA H100 80GB HBM3 MIG 3g.40gb", (0, 0), 40192, "MIG-bbbb0000-2222"),
    ]
    install_fake(fake_pynvml(listed))
    (gpu,) = probe_gpus({"CUDA_VISIBLE_DEVICES": "MIG-bbbb"}).gpus
    assert gpu.name.endswith("MIG 3g.40gb")
    assert gpu.cc == 90  # the parent's compute capability
    assert gpu.nvml_index == 1
    assert gpu.memory_total_mib == 40192
    assert gpu.uuid == "MIG-bbbb0000-2222"


@given(st.lists(st.integers(min_value=0, max_value=7), max_size=8, unique=True))
def test_distinct_valid_indices_are_kept_in_order(indices: list[int]) -> None:
    value = ",".join(str(i) for i in indices)
    assert visible_devices(value, 8, []) == [("gpu", i) for i in indices]


@given(st.text(alphabet="0123456789,+- GPUabc", max_size=20), st.integers(0, 8))
def test_any_value_gives_distinct_in_range_devices(value: str, count: int) -> None:
    chosen = visible_devices(value, count, [f"GPU-{i}" for i in range(count)])
    assert len(set(chosen)) == len(chosen)
    assert all(0 <= index < count for _, index in chosen)
