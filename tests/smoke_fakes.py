"""FAKE smoke adapters for fault-injection tests. Not part of fp4doctor; never shipped.

Each one misbehaves in one labelled way (a wrong answer, an answer 30x too small, an output
left half unwritten, an abort, a segfault, a hang, junk on stdout, a library exception), so
the tests can show that each becomes the right result and that the adapters after it still
run; `fake-where` reports where its worker runs, `fake-collector` whether its garbage collector
is on. Workers load them through the test-only hook
`FP4DOCTOR_SMOKE_EXTRA_ADAPTERS=smoke_fakes:FAKES` (see `fake_env()`).

With `FP4DOCTOR_TEST_PID_DIR` set, every fake writes the pids it knows of (its worker's, and
for the hang its own child's) to a file there, so the tests can check no process outlives
the run. torch is imported only inside the fakes, so importing this module stays cheap.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fp4doctor.smoke.result import SmokeResult
from fp4doctor.smoke.worker import EXTRA_ADAPTERS_ENV

if TYPE_CHECKING:
    import torch

    from fp4doctor.smoke.cases import Case

PID_DIR_ENV = "FP4DOCTOR_TEST_PID_DIR"

# The workers import torch: without it (`pip install -e '.[test]'` alone) the tests that run
# them are skipped with this reason (`pytest.mark.skipif(not HAS_TORCH, reason=NO_TORCH)`).
HAS_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = "the smoke workers need torch, which is not installed (pip install 'fp4doctor[smoke]')"


def fake_env(pid_dir: Path | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment whose workers also know the fakes below."""
    env = dict(os.environ if base is None else base)
    here = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env[EXTRA_ADAPTERS_ENV] = "smoke_fakes:FAKES"
    if pid_dir is not None:
        env[PID_DIR_ENV] = str(pid_dir)
    return env


def note_pids(name: str, *pids: int) -> None:
    """Record this worker's pid (and `pids`) for the orphan checks."""
    pid_dir = os.environ.get(PID_DIR_ENV)
    if pid_dir:
        path = Path(pid_dir) / f"{name}.{os.getpid()}"
        path.write_text(" ".join(str(p) for p in (os.getpid(), *pids)))


def _ref(case: Case, out: torch.Tensor) -> torch.Tensor:
    return case.ref.to(device=out.device, dtype=out.dtype)


def _wrong(case: Case, out: torch.Tensor) -> object:
    import torch

    # Same magnitude, wrong places: the norm check passes, the elementwise one must not.
    return out.copy_(torch.roll(_ref(case, out), shifts=1, dims=1))


def _too_small(case: Case, out: torch.Tensor) -> object:
    return out.copy_(_ref(case, out) / 30)


def _half_unwritten(case: Case, out: torch.Tensor) -> object:
    half = case.n // 2
    return out[:, :half].copy_(_ref(case, out)[:, :half])


def _abort(case: Case, out: torch.Tensor) -> object:
    os.abort()


def _segfault(case: Case, out: torch.Tensor) -> object:
    return ctypes.string_at(0)  # reads address 0: SIGSEGV


def _hang(case: Case, out: torch.Tensor) -> object:
    # A child in the worker's process group, to show the whole group is killed.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    note_pids("fake-hang-child", child.pid)
    while True:
        time.sleep(60)


def _junk_stdout(case: Case, out: torch.Tensor) -> object:
    # What chatty libraries do: print, write fd 1 directly, even a protocol-looking line.
    print("cudnn_handle created for device_id = 0")
    print('{"event": "result", "adapter": "fake-junk-stdout", "status": "fail", "reason": "x"}')
    sys.stdout.flush()
    os.write(1, b'not json\n{"event": "done"}\n{"half a line')
    return out.copy_(_ref(case, out))


def _raises(case: Case, out: torch.Tensor) -> object:
    raise RuntimeError(
        "FAKE library error: no kernel for this device\n"
        "  detail line one\n"
        "  Reason: FAKE engine is only supported since Blackwell architecture\n"
    )


def _where(case: Case, out: torch.Tensor) -> object:
    import torch

    from fp4doctor.smoke.adapters import Unavailable

    # Reports where the worker runs, as a `skip` reason (the only text a fake can send).
    text = f"where: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}"
    if out.device.type == "cuda":
        props = torch.cuda.get_device_properties(out.device)
        text += f" devices={torch.cuda.device_count()} uuid={getattr(props, 'uuid', '?')}"
    raise Unavailable(text)


def _collector(case: Case, out: torch.Tensor) -> object:
    import gc

    from fp4doctor.smoke.adapters import Unavailable

    # Reports whether the worker's cyclic garbage collector is on (fp4doctor/smoke/worker.py
    # holds it off), as a `skip` reason.
    raise Unavailable(f"collector: {'on' if gc.isenabled() else 'off'}")


@dataclass(frozen=True)
class Fake:
    """A labelled fake adapter: `behaviour` runs as its GEMM call."""

    name: str
    behaviour: Callable[[Case, torch.Tensor], object]
    supports_cpu: bool = True

    def load(self) -> str:
        note_pids(self.name)
        return "FAKE adapter (tests/smoke_fakes.py)"

    def bind(self, case: Case, out: torch.Tensor) -> Callable[[], object]:
        return lambda: self.behaviour(case, out)


@dataclass(frozen=True)
class FlakyFake(Fake):
    """Right on the first call, then `behaviour` (30x too small) on every later one (the timed
    calls)."""

    name: str = "fake-flaky"
    behaviour: Callable[[Case, torch.Tensor], object] = _too_small

    def bind(self, case: Case, out: torch.Tensor) -> Callable[[], object]:
        calls = [0]

        def call() -> object:
            calls[0] += 1
            return out.copy_(_ref(case, out)) if calls[0] == 1 else self.behaviour(case, out)

        return call


@dataclass(frozen=True)
class SlowImportFake(Fake):
    """FAKE: a library whose import takes `seconds` (a real FlashInfer import takes 1-2 s on an
    H200 host, once per worker), then answers right."""

    name: str = "fake-slow-import"
    behaviour: Callable[[Case, torch.Tensor], object] = lambda case, out: out.copy_(_ref(case, out))
    seconds: float = 4.5

    def load(self) -> str:
        label = super().load()
        time.sleep(self.seconds)
        return label


FAKES = (
    SlowImportFake(),
    SlowImportFake("fake-hung-import", seconds=600.0),
    Fake("fake-wrong", _wrong),
    Fake("fake-30x-small", _too_small),
    Fake("fake-unwritten", _half_unwritten),
    Fake("fake-abort", _abort),
    Fake("fake-segfault", _segfault),
    Fake("fake-hang", _hang),
    Fake("fake-junk-stdout", _junk_stdout),
    Fake("fake-raises", _raises),
    Fake("fake-where", _where),
    Fake("fake-collector", _collector),
    FlakyFake(),
)


# --- out of memory, and an `emulation` to interrupt (tests/test_faults_smoke.py) --------------


def _oom_cuda(case: Case, out: torch.Tensor) -> object:
    import torch

    # FAKE: the exception and the words of CUDA's caching allocator; this host has no GPU.
    raise torch.cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "
        "139.80 GiB of which 1.25 GiB is free. Process 4242 has 138.54 GiB memory in use."
    )


def _oom_rlimit(case: Case, out: torch.Tensor) -> object:
    import resource

    import torch

    # A real allocation failure, made safe: the worker's address space is capped a little
    # above what it uses (RLIMIT_AS), so a 1 GiB tensor cannot be mapped whatever the host
    # has free; the cap is lifted again for the adapters after this one.
    with open("/proc/self/status") as status:
        vm_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm_kib * 1024 + (256 << 20), hard))
    try:
        return torch.empty(1 << 30, dtype=torch.uint8)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _oom_killed(case: Case, out: torch.Tensor) -> object:
    import signal

    # FAKE: SIGKILL, the signal the kernel's OOM killer (or a cgroup memory limit) sends; a
    # real one would need this host's memory exhausted.
    os.kill(os.getpid(), signal.SIGKILL)
    return None


OOM_FAKES = (
    Fake("fake-oom-cuda", _oom_cuda),
    Fake("fake-oom-rlimit", _oom_rlimit),
    Fake("fake-oom-killed", _oom_killed),
)
"""Load with `FP4DOCTOR_SMOKE_EXTRA_ADAPTERS=smoke_fakes:FAKES,smoke_fakes:OOM_FAKES`."""

HANGING_EMULATION = (Fake("emulation", _hang),)
"""FAKE: an `emulation` adapter that hangs (with a child), standing in for the real one: on a
CPU host `fp4doctor check` runs only `emulation`, and a test needs a smoke run that lasts
long enough to interrupt. Load with `FP4DOCTOR_SMOKE_EXTRA_ADAPTERS=smoke_fakes:HANGING_EMULATION`
(extra adapters take precedence over built-in ones of the same name)."""


# --- runs through the fakes, for the tests (never used by the workers) ------------------------


@dataclass
class FakeRun:
    """A finished `run_smoke` through the fakes, with what its fakes recorded."""

    results: list[SmokeResult]
    arrived: list[tuple[float, SmokeResult]]  # (wall-clock time, result) as on_result saw them
    pid_dir: Path

    def __getitem__(self, adapter: str) -> SmokeResult:
        (r,) = [r for r in self.results if r.adapter == adapter]
        return r

    def recorded(self, prefix: str = "") -> dict[str, list[int]]:
        """`name.pid` files written by the fakes (tests/smoke_fakes.py) -> the pids in them."""
        return {
            p.name: [int(x) for x in p.read_text().split()]
            for p in sorted(self.pid_dir.iterdir())
            if p.name.startswith(prefix)
        }

    def worker_of(self, fake: str) -> int:
        """The pid of the worker that ran `fake` (which ran exactly once)."""
        (pids,) = self.recorded(f"{fake}.").values()
        return pids[0]


def run_fakes(
    names: list[str], pid_dir: Path, timeout_s: float, env: dict[str, str] | None = None
) -> FakeRun:
    """`run_smoke(names)` on the CPU, the fakes loaded and recording their pids in `pid_dir`."""
    from fp4doctor.smoke import run_smoke

    arrived: list[tuple[float, SmokeResult]] = []
    results = run_smoke(
        names,
        [],
        timeout_s=timeout_s,
        env=fake_env(pid_dir) if env is None else env,
        on_result=lambda r: arrived.append((time.time(), r)),
    )
    return FakeRun(results, arrived, pid_dir)


# --- one shared run through the fakes that do not hang (tests/conftest.py: `fault_run`) -------

WRONG_ANSWERS = (
    "fake-wrong",
    "fake-30x-small",
    "fake-unwritten",
    "fake-raises",
    "fake-flaky",
    "no-such-adapter",
)
CRASHES = ("fake-abort", "fake-segfault")
OUT_OF_MEMORY = tuple(fake.name for fake in OOM_FAKES)
FAULT_RUN = (*WRONG_ANSWERS, *CRASHES, *OUT_OF_MEMORY, "emulation", "fake-collector")
"""The order of the shared run. Each worker costs `import torch` (seconds on a small CI host),
so the wrong answers, the crashes and the out-of-memory cases share one run of 4 workers: the
wrong answers and the abort in the first, the segfault in the second, the three out-of-memory
cases in the third (the SIGKILL ends it), and `emulation`, a real adapter, and
`fake-collector` in a fourth."""
