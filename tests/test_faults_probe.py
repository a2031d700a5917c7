"""Probe faults that tests/test_probe_*.py do not cover, each through to its finding.

- a torch install whose `import torch` raises (a fake `torch` package first on PYTHONPATH):
  the probe reads its version from the metadata without importing it, and `check` turns the
  worker's failed start into an `error` finding with the reason, never a traceback;
- unreadable `site-packages` entries, through the real command line: recorded in
  `packages.errors`, the other packages still read, and `check` says so with a fix;
- a GPU that falls off the bus in the middle of the probe (a labelled fake pynvml): the
  other GPU is still reported, and the loss becomes a finding with its fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fp4doctor import facts, profile
from fp4doctor.probe import gpus as gpus_probe
from fp4doctor.probe import probe_host
from fp4doctor.probe.packages import probe_packages
from fp4doctor.rules import FIX_GPU_UNREADABLE, evaluate


def fp4doctor_cli(
    *args: str, pythonpath: Path, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m fp4doctor ARGS` with `pythonpath` first on the module search path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(pythonpath) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "fp4doctor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def write_dist(site: Path, directory: str, name: str, version: str) -> Path:
    info = site / directory
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return info


# --- a torch whose import raises --------------------------------------------------------------

# What a broken torch install raises, as users meet it.
BROKEN_TORCH = {
    "missing-shared-library": (
        "ImportError",
        "libtorch_cuda.so: cannot open shared object file: No such file or directory",
    ),
    "missing-dependency": (
        "OSError",
        "libcudnn.so.9: cannot open shared object file: No such file or directory",
    ),
    "missing-extension": ("ModuleNotFoundError", "No module named 'torch._C'"),
}

FAKE_TORCH_INIT = """\
# FAKE torch (tests/test_faults_probe.py): records who imports it, then fails as a broken
# install does.
import os
with open({marker!r}, "a") as f:
    cmdline = open("/proc/self/cmdline", "rb").read().replace(b"\\0", b" ").decode()
    f.write(f"{{os.getpid()}} {{cmdline}}\\n")
if {kind!r} == "ModuleNotFoundError":
    raise ModuleNotFoundError({message!r}, name="torch._C")
raise {kind}({message!r})
"""


@dataclass(frozen=True)
class BrokenTorch:
    site: Path
    marker: Path
    message: str

    def importers(self) -> dict[int, str]:
        """pid -> command line of every process that imported the fake torch."""
        if not self.marker.exists():
            return {}
        lines = self.marker.read_text().splitlines()
        return {int(pid): cmd for pid, _, cmd in (line.partition(" ") for line in lines)}


@pytest.fixture(params=sorted(BROKEN_TORCH))
def broken_torch(request: pytest.FixtureRequest, tmp_path: Path) -> BrokenTorch:
    kind, message = BROKEN_TORCH[request.param]
    site = tmp_path / "site"
    write_dist(site, "torch-2.9.1.dist-info", "torch", "2.9.1")
    package = site / "torch"
    package.mkdir()
    marker = tmp_path / "imported-by"
    (package / "__init__.py").write_text(
        FAKE_TORCH_INIT.format(marker=str(marker), kind=kind, message=message)
    )
    (package / "version.py").write_text(
        "__version__ = '2.9.1+cu128'\ncuda = '12.8'\ngit_version = 'abc123'\nhip = None\n"
    )
    return BrokenTorch(site, marker, message)


def test_the_fake_torch_really_fails_to_import(broken_torch: BrokenTorch) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import torch"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(broken_torch.site)},
    )
    assert done.returncode == 1
    assert broken_torch.message in done.stderr.splitlines()[-1]
    assert len(broken_torch.importers()) == 1


def test_probe_reads_a_broken_torchs_version_without_importing_it(
    broken_torch: BrokenTorch,
) -> None:
    done = fp4doctor_cli("probe", "--json", pythonpath=broken_torch.site)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    packages = json.loads(done.stdout)["packages"]
    assert packages["versions"]["torch"] == "2.9.1+cu128"  # torch.__version__, from its text
    assert (packages["torch_cuda"], packages["torch_git_version"]) == ("12.8", "abc123")
    assert packages["errors"] == {}
    assert broken_torch.importers() == {}  # the probe never ran `import torch`


# The GPU hidden from the doctor and its worker, as `CUDA_VISIBLE_DEVICES=""` hides it from
# CUDA: these tests are about a CPU host (the smoke run is `emulation` on the CPU, the verdict
# "not ready"), and on a GPU host they would otherwise judge that GPU.
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


def test_check_turns_a_broken_torch_into_an_error_finding(broken_torch: BrokenTorch) -> None:
    done = fp4doctor_cli(
        "check",
        "--target",
        "vllm",
        "--json",
        "--smoke",
        pythonpath=broken_torch.site,
        extra_env=NO_GPU,
    )
    assert done.returncode == 1, done.stderr  # not ready (no GPU visible), not a crash
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    smokes = {f["id"]: f for f in report["findings"] if f["id"].startswith("smoke.")}
    assert sorted(smokes) == ["smoke.emulation-moe.cpu", "smoke.emulation.cpu"]  # both families
    for adapter in ("emulation", "emulation-moe"):
        smoke = smokes[f"smoke.{adapter}.cpu"]
        assert smoke["status"] == "error"
        assert smoke["reason"] == f"{adapter} on cpu: import torch failed: {broken_torch.message}"
        assert broken_torch.message in smoke["details"]["library_error"]  # the worker's traceback
    # Only the worker imported it; the doctor itself never did.
    importers = broken_torch.importers()
    assert importers
    assert all("fp4doctor.smoke.worker" in cmd for cmd in importers.values()), importers


# --- unreadable site-packages entries ---------------------------------------------------------


@pytest.fixture
def damaged_site(tmp_path: Path) -> Path:
    """A site directory with three unreadable entries and one good one."""
    site = tmp_path / "site"
    dangling = write_dist(site, "vllm-0.15.1.dist-info", "vllm", "0.15.1") / "METADATA"
    dangling.unlink()
    dangling.symlink_to(tmp_path / "gone" / "METADATA")  # a dangling symlink
    not_utf8 = write_dist(site, "sglang-0.5.9.dist-info", "sglang", "0.5.9") / "METADATA"
    not_utf8.write_bytes(b"Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.\xff\n")
    a_directory = write_dist(site, "b12x-0.1.dist-info", "b12x", "0.1") / "METADATA"
    a_directory.unlink()
    a_directory.mkdir()
    write_dist(site, "tensorrt_llm-1.2.0.dist-info", "tensorrt_llm", "1.2.0")
    return site


def test_probe_records_unreadable_entries_and_carries_on(damaged_site: Path) -> None:
    done = fp4doctor_cli("probe", "--json", pythonpath=damaged_site)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    packages = json.loads(done.stdout)["packages"]
    errors = packages["errors"]
    assert sorted(errors) == ["b12x", "sglang", "vllm"]
    assert "vllm-0.15.1.dist-info" in errors["vllm"]
    assert "UnicodeDecodeError" in errors["sglang"]
    assert "b12x-0.1.dist-info" in errors["b12x"]
    assert packages["versions"]["tensorrt-llm"] == "1.2.0"
    # Every package of the real site-packages behind it is still read.
    behind = probe_packages().versions
    assert behind.items() <= packages["versions"].items()


def test_check_says_an_unreadable_engine_is_judged_without_its_metadata(
    damaged_site: Path,
) -> None:
    done = fp4doctor_cli(
        "check",
        "--target",
        "vllm",
        "--json",
        "--no-smoke",
        pythonpath=damaged_site,
        extra_env=NO_GPU,
    )
    assert done.returncode == 1, done.stderr  # not ready (no GPU visible), not a crash
    assert "Traceback" not in done.stderr
    findings = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
    vllm = findings["host.package.vllm"]
    assert vllm["status"] == "warn"
    assert vllm["reason"].startswith(
        "cannot read the installed vllm's metadata, so the rules judge without it: "
    )
    assert vllm["fix"] == (
        "reinstall vllm at the version you use "
        "(pip install --force-reinstall --no-deps 'vllm==VERSION')"
    )
    assert {"host.package.sglang", "host.package.b12x"} <= set(findings)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 directory anyway")
def test_a_dist_info_directory_without_permissions_is_an_error(tmp_path: Path) -> None:
    info = write_dist(tmp_path, "vllm-0.15.1.dist-info", "vllm", "0.15.1")
    info.chmod(0)
    try:
        found = probe_packages([str(tmp_path)])
    finally:
        info.chmod(0o755)
    assert "vllm" in found.errors
    assert "vllm" not in found.versions


# --- a GPU lost in the middle of the probe ----------------------------------------------------


class FakeNVMLError(Exception):
    """Stands in for pynvml.NVMLError, with NVML's return code as `.value`."""

    def __init__(self, value: int, message: str) -> None:
        super().__init__(message)
        self.value = value


class FakeNVMLError_GpuIsLost(FakeNVMLError):  # pynvml spells it so
    def __init__(self) -> None:
        super().__init__(15, "GPU is lost")


@dataclass
class FallingGpu:
    """A GPU that answers `answers` device calls, then has fallen off the bus."""

    name: str
    uuid: str
    answers: int | None = None  # None: never falls off

    def call(self) -> None:
        if self.answers is not None:
            if self.answers <= 0:
                raise FakeNVMLError_GpuIsLost()
            self.answers -= 1


def falling_pynvml(gpus: list[FallingGpu]) -> types.ModuleType:
    """fake: a pynvml over GPUs this host does not have; one can fall off mid-probe."""
    module = types.ModuleType("pynvml")

    def on(gpu: FallingGpu, value: Any) -> Callable[..., Any]:
        def answer(*_: object) -> Any:
            gpu.call()
            return value

        return answer

    def handle(index: int) -> FallingGpu:
        gpus[index].call()
        return gpus[index]

    def memory(gpu: FallingGpu) -> Any:
        gpu.call()
        return types.SimpleNamespace(total=183359 * 1024 * 1024, free=0, used=0)

    functions: dict[str, Callable[..., Any]] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "580.95.05",
        "nvmlSystemGetCudaDriverVersion_v2": lambda: 13000,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetUUID": lambda gpu: on(gpu, gpu.uuid)(),
        "nvmlDeviceGetName": lambda gpu: on(gpu, gpu.name)(),
        "nvmlDeviceGetCudaComputeCapability": lambda gpu: on(gpu, (10, 0))(),
        "nvmlDeviceGetMemoryInfo": memory,
    }
    for name, function in functions.items():
        setattr(module, name, function)
    module.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    module.NVMLError_GpuIsLost = FakeNVMLError_GpuIsLost  # type: ignore[attr-defined]
    return module


# The probe asks each GPU, in order: its handle, its UUID, then (for the GPUs CUDA shows) its
# compute capability, its name and its memory. The second GPU falls off before each of these.
LOST_BEFORE = {"uuid": 1, "compute capability": 2, "name": 3, "memory": 4}


@pytest.fixture(params=list(LOST_BEFORE))
def gpu_lost_mid_probe(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[FallingGpu]]:
    """fake: a GPU that falls off the bus during the probe (no GPU on this host at all)."""
    gpus = [
        FallingGpu("NVIDIA B200", "GPU-00000000-1111-2222-3333-444444444440"),
        FallingGpu(
            "NVIDIA B200",
            "GPU-00000001-1111-2222-3333-444444444441",
            answers=LOST_BEFORE[request.param],
        ),
    ]
    monkeypatch.setitem(sys.modules, "pynvml", falling_pynvml(gpus))
    yield gpus


def test_a_gpu_lost_mid_probe_leaves_the_other_reported(
    gpu_lost_mid_probe: list[FallingGpu],
) -> None:
    report = gpus_probe.probe_gpus({})
    assert report.nvml.status == facts.NVML_OK
    assert [(g.index, g.nvml_index, g.name, g.cc) for g in report.gpus] == [
        (0, 0, "NVIDIA B200", 100)
    ]
    assert report.gpus[0].uuid == gpu_lost_mid_probe[0].uuid
    assert report.notes == {"gpu.nvml1": "NVML could not describe this GPU: GPU is lost"}


def test_a_gpu_lost_mid_probe_is_a_finding_with_its_fix(
    gpu_lost_mid_probe: list[FallingGpu],
) -> None:
    host = probe_host({})
    assert [g.nvml_index for g in host.gpus] == [0]
    evaluation = evaluate(profile.load("vllm"), host)
    findings = {f.id: f for f in evaluation.host}
    lost = findings["host.probe.gpu.nvml1"]
    assert lost.reason == (
        "the gpu.nvml1 probe failed: NVML could not describe this GPU: GPU is lost"
    )
    assert lost.fix == FIX_GPU_UNREADABLE
    assert "reset" in lost.fix and "reboot" in lost.fix
    assert findings["host.gpus"].reason.startswith("1 GPU(s) visible: 1× NVIDIA B200")
