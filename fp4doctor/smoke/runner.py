"""The parent side of the smoke stage: one isolated worker process per GPU, all in parallel.

No torch here. Each GPU gets a thread that starts `python -m fp4doctor.smoke.worker` pinned to
that GPU (CUDA_VISIBLE_DEVICES set to the physical device behind the engine's index), reads
its JSON lines, and enforces the timeouts. A worker that crashes (segfault, abort, CUDA
fault) or stalls is killed with its whole process group; the adapter it was running becomes
an `error` result naming the signal or the timeout, and a fresh worker takes the adapters
that are left. Ctrl-C kills every worker and re-raises once what finished is recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import site
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from fp4doctor.findings import Status
from fp4doctor.signals import signal_name
from fp4doctor.smoke.errors import LIBRARY_ERROR_CHARS
from fp4doctor.smoke.result import SmokeResult

STARTUP_TIMEOUT_S = 120.0
"""Budget for start-up: the worker's interpreter + `import torch` + CUDA init before it says
hello (`import torch` alone measured 3.6–8 s on an H200 host). Start-up and each adapter's
library import (`IMPORT_TIMEOUT_S`) have budgets of their own, apart from the GEMMs' (the
user's `--smoke-timeout`): a short timeout does not kill workers that are still starting,
and a slow start-up costs once per GPU, not once per backend."""
IMPORT_TIMEOUT_S = 120.0
"""Budget for an adapter's library import, between its start and loaded messages: start-up
too (FlashInfer's import takes 1-2 s on an H200 host, once per worker)."""
EXIT_GRACE_S = 10.0  # for a worker whose pipe closed to exit (CUDA teardown) before it is killed
_POLL_S = 0.25
WORKER_CPU_THREADS = 2  # OMP_NUM_THREADS of each worker: see worker_env
_MAX_LINE = 1 << 20
_READ_PER_CALL = 1 << 20  # what one `_LineReader.read` takes from the pipe before it returns
STDERR_KEPT = 64 << 10  # the tail of a worker's stderr kept for its crash report


class SmokeInterrupted(KeyboardInterrupt):
    """Ctrl-C during `run_smoke`: every worker has been killed; `results` holds what finished."""

    def __init__(self, results: list[SmokeResult]) -> None:
        super().__init__()
        self.results = results


@dataclass(frozen=True)
class _Slot:
    """Where one worker runs: a GPU as the engine numbers it, or the CPU."""

    order: int
    gpu: int | None
    visible: str | None  # CUDA_VISIBLE_DEVICES for the worker; None: the index is not visible

    @property
    def device(self) -> str:
        return "cpu" if self.gpu is None else f"cuda:{self.gpu}"


def physical_device(index: int, user_visible: str | None) -> str | None:
    """The CUDA_VISIBLE_DEVICES entry that pins a worker to the GPU the engine calls `index`.

    Without a user CUDA_VISIBLE_DEVICES the engine's index is CUDA's own. With one, index i
    is its i-th entry (an ordinal, a UUID or a MIG id, passed through as written); None when
    the list has no such entry.
    """
    if user_visible is None:
        return str(index)
    entries = [e.strip() for e in user_visible.split(",") if e.strip()]
    return entries[index] if 0 <= index < len(entries) else None


def _package_root() -> str | None:
    """The directory holding the `fp4doctor` package when it runs from a source checkout
    (so the worker imports this same copy), None when it is installed in site-packages."""
    root = Path(__file__).resolve().parents[2]
    installed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with contextlib.suppress(AttributeError):
        installed.update(site.getsitepackages())
    installed_paths = {Path(p).resolve() for p in installed}
    return None if root in installed_paths else str(root)


def worker_env(base: Mapping[str, str], visible: str, allow_jit: bool) -> dict[str, str]:
    """The environment a worker runs with: the engine's, pinned to one device, and with
    FlashInfer's JIT compiles and cubin downloads off unless `allow_jit`."""
    env = dict(base)
    env["CUDA_VISIBLE_DEVICES"] = visible
    env["PYTHONUNBUFFERED"] = "1"  # the stderr tail kept for crash reports is complete
    # What torch sets when it starts CUDA, unless set (pytorch aten/src/ATen/cuda/detail/
    # CUDAHooks.cpp, maybe_set_cuda_module_loading), set here: the worker starts CUDA before
    # torch does (worker `_Start`), and the driver reads it then.
    env.setdefault("CUDA_MODULE_LOADING", "LAZY")
    # The problems are tiny: a few CPU threads per worker are plenty. Left alone, each worker's
    # OpenMP pool takes every core, and workers running side by side (one per GPU) starve
    # each other: measured on 2x H200, the 0.2 s emulation check took 1.1-1.7 s per worker.
    env["OMP_NUM_THREADS"] = str(WORKER_CPU_THREADS)
    if not allow_jit:
        env["FLASHINFER_DISABLE_JIT"] = "1"
        env["FLASHINFER_NO_DOWNLOAD"] = "1"
    root = _package_root()
    if root is not None:
        path = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    return env


def _exit_text(rc: int | None) -> str:
    if rc is None:
        return "worker did not exit"
    if rc < 0:
        return f"worker killed by {signal_name(-rc)} (signal {-rc})"
    return f"worker exited with code {rc}"


class _StderrTail:
    """A worker's stderr through a pipe, drained by a thread that keeps only its last
    `STDERR_KEPT` bytes and counts the rest: a worker that floods stderr costs neither memory
    nor disk (a temporary file once grew 2.97 GB in 15 s), and a parent can stop it at a cap
    (`total`)."""

    def __init__(self) -> None:
        self._read_fd, self.write_fd = os.pipe()
        self._lock = threading.Lock()
        self._tail = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._drain, name="worker-stderr", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._read_fd, 65536):
                with self._lock:
                    self.total += len(chunk)
                    self._tail += chunk
                    del self._tail[:-STDERR_KEPT]
        except OSError:
            pass
        finally:
            os.close(self._read_fd)

    def parent_side_opened(self) -> None:
        """The worker has its copy of the write end: close ours, so that the pipe ends when the
        worker and what it started are gone."""
        os.close(self.write_fd)

    def tail(self, limit: int) -> bytes:
        with self._lock:
            return bytes(self._tail[-limit:]) if limit > 0 else b""


class _Worker:
    """One worker process in its own process group, with the tail of its stderr kept."""

    def __init__(self, cmd: list[str], env: Mapping[str, str], job_on_stdin: bool = False) -> None:
        self._lock = threading.Lock()
        self.stderr = _StderrTail()
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE if job_on_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self.stderr.write_fd,
                env=dict(env),
                start_new_session=True,  # its own group: killable as a whole, deaf to terminal ^C
                close_fds=True,
            )
        finally:
            self.stderr.parent_side_opened()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def give_job(self, device: str, visible: str, adapters: Sequence[str]) -> bool:
        """Send a prestarted worker its job (see worker `--job-on-stdin`); False when it can no
        longer take one (it died while starting)."""
        job = {"device": device, "visible": visible, "adapters": list(adapters)}
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.close()
        except (OSError, ValueError):
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the whole process group. Safe while the leader is unreaped: its pid, which
        is the group id, cannot have been reused."""
        with self._lock:
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)

    def dismiss(self) -> None:
        """The worker said "done": everything is said. `reap` it at once, in the background, so
        that the doctor does not wait while the kernel tears the worker down (its CUDA context
        and mappings: 0.13-0.2 s after "done" on an H200)."""
        threading.Thread(target=self.reap, args=(0.0,), name="smoke-reap", daemon=True).start()

    def _exited(self) -> bool:
        try:  # WNOWAIT: look, but leave the zombie so its pid stays reserved until reaped
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None and info.si_pid != 0

    def _wait_exited(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not self._exited():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def reap(self, grace_s: float) -> int | None:
        """Wait up to `grace_s` for the worker to exit, kill what is left of its group (the
        worker if it is still there, and any process it started), and return its exit code.
        None if even SIGKILL does not end it (a process stuck in the driver): it is left
        behind rather than hanging the doctor."""
        self._wait_exited(grace_s)
        self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if not self._wait_exited(EXIT_GRACE_S):
            return None
        with self._lock:  # the zombie is there: this wait does not block
            return self.proc.wait()

    def stderr_tail(self, limit: int = LIBRARY_ERROR_CHARS) -> str | None:
        text = self.stderr.tail(limit).decode("utf-8", "replace").strip()
        return text or None

    @property
    def stderr_bytes(self) -> int:
        """How much the worker (and what it started) wrote to stderr so far."""
        return self.stderr.total

    def exited(self) -> bool:
        """The worker itself has exited (what it started may still hold its pipes)."""
        return self._exited()

    def close(self) -> None:
        """Nothing is left to close: the stderr pipe ends with the last process holding it."""


def _worker_command(*arguments: str) -> list[str]:
    # `-m` puts the current directory first on sys.path: a directory holding another copy of
    # fp4doctor (a checkout) would give the worker that copy. `-P` (Python 3.11+) leaves it
    # out, so the worker imports the copy the doctor runs from (PYTHONPATH, see worker_env).
    safe_path = ["-P"] if sys.version_info >= (3, 11) else []
    return [
        sys.executable,
        *safe_path,
        "-m",
        "fp4doctor.smoke.worker",
        "--parent-pid",
        str(os.getpid()),
        *arguments,
    ]


class Prestarted:
    """A worker started before the doctor knows its GPU and adapters: it imports torch (seconds)
    while the probe and the rules run, then waits for its job, which `run_smoke` gives it
    (`prestarted=`) for its first GPU. `close` ends it when no live GEMM runs after all.

    Its environment is the one `run_smoke` would give a worker, but for CUDA_VISIBLE_DEVICES,
    which the job sets before CUDA starts."""

    def __init__(self, *, allow_jit: bool = False, env: Mapping[str, str] | None = None) -> None:
        self.env = worker_env(dict(os.environ if env is None else env), "", allow_jit)
        self._worker: _Worker | None = _Worker(
            _worker_command("--job-on-stdin"), self.env, job_on_stdin=True
        )

    def take(self, env: Mapping[str, str]) -> _Worker | None:
        """The worker, for a slot whose environment is `env` (None when it does not fit, or
        was taken)."""
        worker, self._worker = self._worker, None
        if worker is None:
            return None
        if {**env, "CUDA_VISIBLE_DEVICES": ""} != self.env:
            self._worker = worker
            return None
        return worker

    def close(self) -> None:
        """Kill it if no run took it (safe to call more than once)."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.reap(0.0)
            worker.close()


class _LineReader:
    """Lines from the worker's protocol pipe, with a timeout. One call takes at most
    `_READ_PER_CALL` bytes, so that a worker writing without end cannot keep the caller from its
    deadline and its caps; `total` counts every byte read, `last` those of the last call."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        os.set_blocking(self._fd, False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._fd, selectors.EVENT_READ)
        self._buf = b""
        self._skipping = False  # inside a line over _MAX_LINE: dropped up to its end
        self.total = 0
        self.last = 0

    def read(self, timeout: float) -> tuple[list[bytes], bool]:
        """(complete lines, eof) after waiting at most `timeout` seconds for data."""
        eof = False
        self.last = 0
        if self._sel.select(max(0.0, timeout)):
            while self.last < _READ_PER_CALL:
                try:
                    chunk = os.read(self._fd, 65536)
                except BlockingIOError:
                    break
                if not chunk:
                    eof = True
                    break
                self.last += len(chunk)
                self._buf += chunk
        self.total += self.last
        *lines, self._buf = self._buf.split(b"\n")
        if self._skipping and lines:
            lines, self._skipping = lines[1:], False  # the rest of the over-long line
        if len(self._buf) > _MAX_LINE:  # not a protocol line; do not let it grow
            self._buf, self._skipping = b"", True
        return lines, eof

    def close(self) -> None:
        self._sel.close()


def _parse(line: bytes) -> dict[str, object] | None:
    """A protocol message, or None for anything else on the pipe (never trusted blindly)."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) and isinstance(msg.get("event"), str) else None


class _Run:
    """State shared by the per-GPU threads: results, the live workers, the stop flag."""

    def __init__(self, on_result: Callable[[SmokeResult], None] | None) -> None:
        self._lock = threading.Lock()
        self._on_result = on_result
        self._workers: set[_Worker] = set()
        self.stop = threading.Event()
        self.results: list[tuple[int, int, SmokeResult]] = []
        self.callback_error: Exception | None = None

    def record(self, slot: _Slot, result: SmokeResult, adapter_order: Mapping[str, int]) -> None:
        with self._lock:
            if self.stop.is_set():
                return
            key = adapter_order.get(result.adapter, len(adapter_order))
            self.results.append((slot.order, key, result))
            try:
                if self._on_result is not None:
                    self._on_result(result)  # under the lock: callbacks come one at a time
            except Exception as exc:  # re-raised by run_smoke in the caller's thread
                self.callback_error = exc
        if self.callback_error is not None:
            self.stop_all()

    def spawn(self, cmd: list[str], env: Mapping[str, str]) -> _Worker | None:
        with self._lock:
            if self.stop.is_set():
                return None
            worker = _Worker(cmd, env)
            self._workers.add(worker)
            return worker

    def adopt(self, worker: _Worker) -> _Worker | None:
        """A prestarted worker, followed (and killed on stop) like a spawned one."""
        with self._lock:
            if self.stop.is_set():
                worker.reap(0.0)  # killed and reaped, its pipe and stderr file closed
                worker.close()
                return None
            self._workers.add(worker)
            return worker

    def forget(self, worker: _Worker) -> None:
        with self._lock:
            self._workers.discard(worker)

    def stop_all(self) -> None:
        with self._lock:
            self.stop.set()
            workers = list(self._workers)
        for worker in workers:
            worker.kill()

    def ordered(self) -> list[SmokeResult]:
        with self._lock:
            return [r for _, _, r in sorted(self.results, key=lambda t: (t[0], t[1]))]


@dataclass
class _SlotRun:
    """One slot's adapters, run through as many workers as crashes require."""

    run: _Run
    slot: _Slot
    remaining: list[str]
    order: Mapping[str, int]
    timeout_s: float
    env: Mapping[str, str]
    prestarted: Prestarted | None = None

    def error(self, adapter: str, reason: str, library_error: str | None = None) -> None:
        result = SmokeResult(
            adapter,
            self.slot.device,
            self.slot.gpu,
            Status.ERROR.value,
            reason,
            library_error=library_error,
        )
        self.run.record(self.slot, result, self.order)

    def fail_remaining(self, reason: str, library_error: str | None = None) -> None:
        for name in self.remaining:
            self.error(name, reason, library_error)
        self.remaining.clear()

    def __call__(self) -> None:
        try:
            while self.remaining and not self.run.stop.is_set():
                self.one_worker()
        except Exception as exc:  # a bug or an OS failure here must not lose the adapters
            self.fail_remaining(f"could not run the smoke worker: {type(exc).__name__}: {exc}")

    def one_worker(self) -> None:
        """Start a worker for the remaining adapters (or give the prestarted one its job) and
        follow it until it exits or stalls."""
        device = "cpu" if self.slot.gpu is None else "cuda"
        worker = self._prestarted(device)
        if worker is None:
            cmd = _worker_command("--device", device, *self.remaining)
            worker = self.run.spawn(cmd, self.env)
        if worker is None:
            return
        assert worker.proc.stdout is not None
        reader = _LineReader(worker.proc.stdout)
        started, in_flight, produced, timed_out, eof = False, None, 0, False, False
        loading = False  # between an adapter's start and its library being imported
        done = False  # the worker said everything it had to say
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        try:
            while not eof and not done:
                lines, eof = reader.read(min(_POLL_S, deadline - time.monotonic()))
                for line in lines:
                    msg = _parse(line)
                    if msg is None:
                        continue
                    event = msg["event"]
                    budget = self.timeout_s  # any message is progress
                    if event == "hello":
                        started = True
                    elif event == "start":
                        in_flight, loading = str(msg.get("adapter")), True
                        budget = max(IMPORT_TIMEOUT_S, self.timeout_s)  # its library's import
                    elif event == "loaded":
                        loading = False
                    elif event == "result":
                        self.take_result(msg)
                        in_flight, loading = None, False
                        produced += 1
                    elif event == "done":
                        done = True
                        break
                    deadline = time.monotonic() + budget
                if self.run.stop.is_set():
                    break
                if not eof and not done and time.monotonic() >= deadline:
                    timed_out = True
                    break
        finally:
            reader.close()
            rc: int | None = 0
            if done:
                worker.dismiss()
            else:
                # After a clean end of the pipe give the worker time to exit (CUDA teardown);
                # otherwise (timeout, Ctrl-C, an exception here) kill it now.
                rc = worker.reap(EXIT_GRACE_S if eof and not self.run.stop.is_set() else 0.0)
            self.run.forget(worker)
        tail = worker.stderr_tail()
        worker.close()
        if self.run.stop.is_set():
            return
        if in_flight is not None and in_flight in self.remaining:
            if timed_out and loading:
                reason = (
                    f"importing its library did not finish within "
                    f"{max(IMPORT_TIMEOUT_S, self.timeout_s):g} s; the worker was killed"
                )
            elif timed_out:
                reason = f"timed out after {self.timeout_s:g} s; the worker was killed"
            else:
                reason = f"crashed: {_exit_text(rc)}"
            self.remaining.remove(in_flight)
            self.error(in_flight, reason, tail)
            produced += 1
        if not self.remaining or produced:
            return  # done, or a fresh worker takes the rest
        if timed_out and not started:
            self.fail_remaining(
                f"the worker did not start within {STARTUP_TIMEOUT_S:g} s "
                "(interpreter, import torch, CUDA init)",
                tail,
            )
        else:
            self.fail_remaining(f"not run: the {_exit_text(rc)} before reaching it", tail)

    def _prestarted(self, device: str) -> _Worker | None:
        """The prestarted worker with this slot's job, when it fits this slot and took it."""
        prestarted, self.prestarted = self.prestarted, None
        worker = prestarted.take(self.env) if prestarted is not None else None
        if worker is None:
            return None
        if not worker.give_job(device, self.slot.visible or "", self.remaining):
            worker.reap(0.0)
            worker.close()
            return None
        return self.run.adopt(worker)

    def take_result(self, msg: Mapping[str, object]) -> None:
        name = str(msg.get("adapter"))
        fields = {k: v for k, v in msg.items() if k != "event"}
        fields.update(device=self.slot.device, gpu=self.slot.gpu)
        try:
            result = SmokeResult.from_dict(fields)
        except (TypeError, ValueError) as exc:
            result = SmokeResult(
                name,
                self.slot.device,
                self.slot.gpu,
                Status.ERROR.value,
                f"bad result from worker: {exc}",
            )
        if name in self.remaining:
            self.remaining.remove(name)
        self.run.record(self.slot, result, self.order)


def run_smoke(
    adapters: Sequence[str],
    gpus: Sequence[int],
    *,
    timeout_s: float = 60.0,
    allow_jit: bool = False,
    env: Mapping[str, str] | None = None,
    on_result: Callable[[SmokeResult], None] | None = None,
    prestarted: Prestarted | None = None,
) -> list[SmokeResult]:
    """Run each adapter's smoke GEMM on each GPU, one isolated worker per GPU, in parallel.

    `gpus` are CUDA indices as the engine sees them (after the user's CUDA_VISIBLE_DEVICES,
    read from `env`); an empty `gpus` runs on the CPU, where adapters that need a GPU report
    `skip`. `env` is the environment the engine runs with (default: this process's).
    `timeout_s` bounds each adapter (library import, plan build and calls included); a
    worker's start-up has its own `STARTUP_TIMEOUT_S`. With `allow_jit` FlashInfer may
    compile kernels and download cubins (raise `timeout_s` to match: minutes).
    `on_result` is called once per result as it arrives, from worker threads, one at a time;
    if it raises, the workers are stopped and `run_smoke` re-raises that exception.
    `prestarted` (see `Prestarted`) runs the first GPU's adapters when its environment fits;
    it is closed here whether or not it was used.
    Returns the results ordered by GPU, then adapter. Ctrl-C raises `SmokeInterrupted` (a
    KeyboardInterrupt) carrying the finished results, after every worker is killed.
    """
    try:
        return _run_smoke(adapters, gpus, timeout_s, allow_jit, env, on_result, prestarted)
    finally:
        if prestarted is not None:
            prestarted.close()


def _run_smoke(
    adapters: Sequence[str],
    gpus: Sequence[int],
    timeout_s: float,
    allow_jit: bool,
    env: Mapping[str, str] | None,
    on_result: Callable[[SmokeResult], None] | None,
    prestarted: Prestarted | None,
) -> list[SmokeResult]:
    names = list(adapters)
    if not names:
        return []
    base = dict(os.environ if env is None else env)
    user_visible = base.get("CUDA_VISIBLE_DEVICES")
    if gpus:
        slots = [_Slot(i, gpu, physical_device(gpu, user_visible)) for i, gpu in enumerate(gpus)]
    else:
        slots = [_Slot(0, None, "")]  # CPU: hide the GPUs from the worker
    order = {name: i for i, name in reversed(list(enumerate(names)))}
    run = _Run(on_result)
    threads: list[threading.Thread] = []
    for slot in slots:
        env_for_slot = worker_env(base, slot.visible or "", allow_jit)
        job = _SlotRun(run, slot, list(names), order, timeout_s, env_for_slot)
        if slot.visible is not None and not threads:
            job.prestarted = prestarted  # the first GPU's
        if slot.visible is None:
            job.fail_remaining(
                f"GPU {slot.gpu} is not visible to the engine: "
                f"CUDA_VISIBLE_DEVICES={user_visible!r}"
            )
            continue
        threads.append(threading.Thread(target=job, name=f"smoke-{slot.device}", daemon=True))
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(_POLL_S)
    except KeyboardInterrupt:
        run.stop_all()
        for thread in threads:
            if thread.ident is not None:
                thread.join(EXIT_GRACE_S)
        raise SmokeInterrupted(run.ordered()) from None
    if run.callback_error is not None:
        raise run.callback_error
    return run.ordered()
