"""The smoke worker: `python -m fp4doctor.smoke.worker --device cpu|cuda ADAPTER...`.

One process per GPU, started by `fp4doctor.smoke.runner` with CUDA_VISIBLE_DEVICES pinned to
that GPU (so it is always `cuda:0` in here). It runs its adapters in turn and writes one
JSON line per event to the protocol pipe, which is the stdout it was started with:

    {"event": "hello", "pid": 123, "torch": "2.11.0+cu130", "device_name": ..., "cc": [9, 0]}
    {"event": "start", "adapter": "flashinfer-cudnn"}
    {"event": "loaded", "adapter": "flashinfer-cudnn"}     (its library imported: GEMMs next)
    {"event": "result", "adapter": "flashinfer-cudnn", "status": "fail", "reason": ..., ...}
    {"event": "done"}

Libraries print to stdout (FlashInfer's "cudnn_handle created for device_id = N"), so before
anything heavy is imported the worker moves the protocol pipe to a private descriptor and
points fd 1 at stderr. A crash or hang is the parent's to handle; everything else becomes a
result line here.
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import functools
import gc
import importlib
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fp4doctor.findings import Status
from fp4doctor.smoke.errors import LIBRARY_ERROR_CHARS, exception_text, telling_line

if TYPE_CHECKING:
    from fp4doctor.smoke.adapters import Adapter
    from fp4doctor.smoke.result import SmokeResult

EXTRA_ADAPTERS_ENV = "FP4DOCTOR_SMOKE_EXTRA_ADAPTERS"
"""Test-only hook: `module:attr[,module:attr]` naming extra adapters (an adapter, an iterable
of adapters, or a name -> adapter mapping) the worker loads besides the built-in ones. It
exists for the fault-injection tests (tests/smoke_fakes.py: wrong results, aborts, segfaults,
hangs); fp4doctor itself never sets it."""


class Channel:
    """The JSON-lines channel to the parent, on a descriptor no library knows about."""

    def __init__(self) -> None:
        # The pipe the parent reads arrives as fd 1. Keep a private duplicate (not inherited
        # by child processes) and send fd 1 to stderr, so stray prints cannot corrupt it.
        self._fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def send(self, event: str, **fields: object) -> None:
        data = (json.dumps({"event": event, **fields}, default=str) + "\n").encode()
        while data:
            data = data[os.write(self._fd, data) :]


def _die_with_parent(parent_pid: int | None) -> None:
    """Ask Linux to SIGKILL this worker if the doctor dies (PR_SET_PDEATHSIG), so a killed
    doctor leaves no worker holding a GPU."""
    if parent_pid is None or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _extra_adapters(spec: str) -> dict[str, Adapter]:
    found: dict[str, Adapter] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        module, _, attr = item.partition(":")
        obj: Any = getattr(importlib.import_module(module), attr or "ADAPTERS")
        values: Iterable[Any]
        if isinstance(obj, Mapping):
            values = obj.values()
        elif isinstance(obj, Iterable):
            values = obj
        else:
            values = [obj]
        found.update((a.name, a) for a in values)
    return found


def _fail_all(proto: Channel, adapters: list[str], status: Status, reason: str, text: str) -> None:
    for name in adapters:
        proto.send("start", adapter=name)
        proto.send("result", adapter=name, status=status.value, reason=reason, library_error=text)


def _send_result(proto: Channel, name: str, result: SmokeResult) -> None:
    fields = result.to_dict()
    for where in ("adapter", "device", "gpu"):  # the parent knows which GPU this worker has
        del fields[where]
    proto.send("result", adapter=name, **fields)


def _job_from_stdin() -> tuple[str, list[str]] | None:
    """A prestarted worker's job: one JSON line {"device", "visible", "adapters"} on stdin,
    sent once the doctor knows its GPU. CUDA_VISIBLE_DEVICES is set here, before anything
    initialises CUDA, which reads it then. None: no job (stdin closed).

    Read while `import torch` runs (`_Start`). The variable is in the worker's environment from
    its start (`Prestarted` sets it empty), so setting it replaces one entry of the C
    environment in place and never moves the array that a concurrent `getenv` may be reading."""
    line = sys.stdin.readline()
    if not line:
        return None
    job = json.loads(line)
    os.environ["CUDA_VISIBLE_DEVICES"] = str(job["visible"])
    return str(job["device"]), [str(name) for name in job["adapters"]]


def _retain_primary_context() -> None:
    """Create device 0's primary CUDA context through the driver. Best effort: a failure (no
    libcuda, no GPU) is left for torch's own start-up to report, in its words."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        device, context = ctypes.c_int(), ctypes.c_void_p()
        if cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(device), 0) == 0:
            cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)
    except (OSError, AttributeError):
        return


class _Start(threading.Thread):
    """What a worker's start can do beside `import torch` (seconds of mostly Python work):
    read a prestarted worker's job, then, for a GPU, create its CUDA context. Creating the
    context is driver work (0.2-0.4 s on an H200) that ctypes runs without the interpreter
    lock, so it overlaps the import instead of following it; torch then takes the same
    primary context. The result: `job`, as `_job_from_stdin` gives it, or the command line's."""

    def __init__(self, on_stdin: bool, device: str | None, adapters: list[str]) -> None:
        super().__init__(name="fp4doctor-worker-start", daemon=True)
        self.on_stdin = on_stdin
        self.job: tuple[str, list[str]] | None = (device or "", adapters)

    def run(self) -> None:
        if self.on_stdin:
            self.job = _job_from_stdin()
        if self.job is not None and self.job[0] == "cuda":
            _retain_primary_context()


def main(argv: list[str] | None = None) -> int:
    # The cyclic collector is off for the worker's life, as for the command line (see
    # fp4doctor/startup.py): `import torch` and a library's import build hundreds of thousands of
    # objects, and the collector walking them as they are built was a quarter of `import torch`
    # (1.25 s -> 0.92 s on the CPU host), with the same peak memory without it (231 MiB against
    # 230; the GEMMs' tensors are freed by reference counting). The worker ends with `os._exit`,
    # so no collection runs at its exit either.
    gc.disable()
    proto = Channel()
    faulthandler.enable(file=sys.stderr, all_threads=True)
    parser = argparse.ArgumentParser(prog="python -m fp4doctor.smoke.worker")
    parser.add_argument("--device", choices=("cpu", "cuda"))
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument(
        "--job-on-stdin",
        action="store_true",
        help="import torch, then read the device and adapters from stdin (a prestarted worker)",
    )
    parser.add_argument("adapters", nargs="*")
    args = parser.parse_args(argv)
    _die_with_parent(args.parent_pid)
    if args.device is None and not args.job_on_stdin:
        parser.error("--device or --job-on-stdin is required")
    start = _Start(args.job_on_stdin, args.device, list(args.adapters))
    start.start()

    torch_failed: Exception | None = None
    try:
        import torch
    except Exception as failed:
        torch_failed = failed
    start.join()
    if start.job is None:
        return 0
    args.device, names = start.job
    if torch_failed is not None:
        proto.send("hello", pid=os.getpid(), torch=None)
        if isinstance(torch_failed, ModuleNotFoundError) and torch_failed.name == "torch":
            reason = f"torch is not installed for {sys.executable}"
            _fail_all(proto, names, Status.SKIP, reason, str(torch_failed))
        else:  # installed but broken (a missing shared library, a failing initialiser, or
            # too little memory: under `ulimit -v` numpy's 25-line advice, or a bare MemoryError)
            text = "".join(traceback.format_exception(torch_failed))
            why = telling_line(str(torch_failed) or exception_text(torch_failed))
            _fail_all(proto, names, Status.ERROR, f"import torch failed: {why}", text)
        proto.send("done")
        return 0

    device = "cpu"
    hello: dict[str, object] = {"pid": os.getpid(), "torch": torch.__version__}
    if args.device == "cuda":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        try:
            if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
                raise RuntimeError(
                    f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA "
                    f"device with CUDA_VISIBLE_DEVICES={visible!r}"
                )
            torch.cuda.set_device(0)
            torch.zeros(1, device="cuda:0").add_(1).item()
            hello["device_name"] = torch.cuda.get_device_name(0)
            hello["cc"] = list(torch.cuda.get_device_capability(0))
        except Exception as exc:
            proto.send("hello", **hello)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            _fail_all(proto, names, Status.ERROR, first, traceback.format_exc())
            proto.send("done")
            return 0
        device = "cuda:0"
    proto.send("hello", **hello)

    from fp4doctor.smoke import harness
    from fp4doctor.smoke.adapters import ADAPTERS, load_adapter

    extra: dict[str, Adapter] = {}
    spec = os.environ.get(EXTRA_ADAPTERS_ENV, "")
    if spec:
        extra = _extra_adapters(spec)

    for name in names:
        proto.send("start", adapter=name)
        if name not in extra and name not in ADAPTERS:
            known = ", ".join([*ADAPTERS, *extra])
            reason = f"unknown smoke adapter {name!r} (known: {known})"
            proto.send("result", adapter=name, status=Status.ERROR.value, reason=reason)
            continue
        context_lost = False
        try:
            adapter = extra[name] if name in extra else load_adapter(name)
            result = harness.run_adapter(
                adapter, device, on_loaded=functools.partial(proto.send, "loaded", adapter=name)
            )
        except harness.ContextLost as lost:
            result, context_lost = lost.result, True
        except Exception as exc:
            text = traceback.format_exc()[-LIBRARY_ERROR_CHARS:]
            proto.send(
                "result",
                adapter=name,
                status=Status.ERROR.value,
                reason=f"fp4doctor's smoke harness failed: {type(exc).__name__}: {exc}",
                library_error=text,
            )
            continue
        _send_result(proto, name, result)
        if context_lost:
            return 3  # the parent starts a fresh worker for the rest
    proto.send("done")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's and torch's teardown (0.5 s with a CUDA context, measured on an
    # H200): everything is said, and the driver frees the GPU as the process ends.
    os._exit(code)
