"""The measurement core shared by the benchmarks in this folder.

Each command runs as a subprocess: warm-up runs (not counted), then N timed runs. Wall time is
measured around the subprocess; CPU time is the user + system time `wait4` reports for the child
and the descendants it waited for (on a machine shared with other work, wall time grows with the
load, CPU time less: read both); peak memory is the largest resident set among the same
processes (`ru_maxrss`: a maximum, not a sum). Medians are taken over the timed runs.
`measure_interleaved` runs several commands round-robin (each one's warm-up first, then round
after round of timed runs), so a change in the machine's load falls on every command alike.

A command whose tool is not installed is reported as absent; one that exits with a status
outside its accepted set, or dies from a signal, is reported as failed, with the last line it
wrote to stderr.

Import it as `timing` (the benchmarks are run as scripts, so this folder is on `sys.path`).
"""

from __future__ import annotations

import compileall
import contextlib
import importlib.util
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from fp4doctor.signals import signal_name

#: What fp4doctor's commands import from outside the standard library (pyproject.toml), and
#: what its live checks' workers import (torch, FlashInfer, cudnn-frontend, tvm-ffi).
DEPENDENCIES = ("fp4doctor", "click", "yaml", "packaging", "pynvml")
LIVE_DEPENDENCIES = ("torch", "flashinfer", "cudnn", "tvm_ffi")


def compile_bytecode(trees: Iterable[Path] = (), live: bool = False) -> None:
    """Compile the bytecode of `trees` and of `DEPENDENCIES` (with `live`, `LIVE_DEPENDENCIES`
    too), where found, as a pip install leaves them. Where bytecode is not written as modules
    load (PYTHONDONTWRITEBYTECODE, which the device machines set, or a read-only site) a module
    without it is compiled again on every run, and a benchmark then times the compiler: pynvml,
    installed there without its bytecode, took 48-61 ms to import instead of 11 ms. A tree that
    cannot be written is left as it is; each is compiled once, however it is named."""
    paths = {path.resolve(): None for path in trees}
    for name in (*DEPENDENCIES, *LIVE_DEPENDENCIES) if live else DEPENDENCIES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or spec.origin is None:
            continue
        found = spec.submodule_search_locations
        paths[Path(next(iter(found)) if found else spec.origin).resolve()] = None
    for path in paths:
        if path.is_dir():
            compileall.compile_dir(path, quiet=2, workers=0)
        else:
            compileall.compile_file(path, quiet=2)


#: Inspects the stdout of the warm-up run; returns facts to keep with the result, or raises
#: ValueError when the output shows the command did not do what it was asked.
Inspector = Callable[[bytes], Mapping[str, Any]]


@dataclass
class Result:
    tool: str
    command: list[str] | None
    status: str = "ok"  # ok | absent | failed
    detail: str | None = None
    walls_s: list[float] = field(default_factory=list)
    cpus_s: list[float] = field(default_factory=list)  # user + system, child and descendants
    peaks_mib: list[float] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # variables set on top of ours
    info: dict[str, Any] = field(default_factory=dict)  # what the inspector found

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.walls_s)

    @property
    def wall_s(self) -> float | None:
        return statistics.median(self.walls_s) if self.walls_s else None

    @property
    def cpu_s(self) -> float | None:
        return statistics.median(self.cpus_s) if self.cpus_s else None

    @property
    def peak_mib(self) -> float | None:
        return statistics.median(self.peaks_mib) if self.peaks_mib else None

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "wall_s_median": self.wall_s,
            "cpu_s_median": self.cpu_s,
            "peak_mib_median": self.peak_mib,
        }


@dataclass
class Run:
    wall_s: float
    peak_mib: float
    exit_code: int  # negative: killed by that signal
    stdout: bytes | None = None  # only when captured
    stderr_tail: str = ""
    timed_out: bool = False
    cpu_s: float = 0.0  # user + system, the child and the descendants it waited for


def script(name: str) -> str | None:
    """A console script installed next to this interpreter, else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return shutil.which(name)


def flashinfer_command() -> list[str] | None:
    """FlashInfer's CLI: its console script, else `python -m flashinfer` where the package is
    importable (as on a host where it was installed with --target, without scripts)."""
    found = script("flashinfer")
    if found:
        return [found]
    import importlib.util

    if importlib.util.find_spec("flashinfer") is not None:
        return [sys.executable, "-m", "flashinfer"]
    return None


def describe_exit(code: int) -> str:
    return f"killed by {signal_name(-code)}" if code < 0 else f"exit {code}"


def run_once(
    command: list[str],
    env: Mapping[str, str] | None = None,
    *,
    capture: bool = False,
    timeout_s: float | None = None,
) -> Run:
    """Run `command` once (with `env` set on top of this environment) and time it.

    stdout goes to /dev/null unless `capture`; stderr goes to a scratch file whose last line is
    kept. The child leads its own process group, so a timeout kills its workers too.
    """
    full_env = {**os.environ, **env} if env else None
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen(
            command,
            stdout=out if capture else subprocess.DEVNULL,
            stderr=err,
            env=full_env,
            start_new_session=True,
        )
        fired = threading.Event()
        timer = None
        if timeout_s is not None:

            def kill() -> None:
                fired.set()
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)

            timer = threading.Timer(timeout_s, kill)
            timer.daemon = True
            timer.start()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        if timer is not None:
            timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
        stdout = None
        if capture:
            out.seek(0)
            stdout = out.read()
    return Run(
        wall_s=wall,
        peak_mib=usage.ru_maxrss / 1024.0,  # Linux reports KiB
        exit_code=child.returncode,
        stdout=stdout,
        stderr_tail=lines[-1].strip() if lines else "",
        timed_out=fired.is_set(),
        cpu_s=usage.ru_utime + usage.ru_stime,
    )


@dataclass
class Spec:
    """One command to measure, with `measure`'s arguments."""

    tool: str
    command: list[str] | None
    why_absent: str | None = None
    ok_codes: Collection[int] = (0,)
    env: Mapping[str, str] | None = None
    inspect: Inspector | None = None


def measure(
    tool: str,
    command: list[str] | None,
    why_absent: str | None,
    runs: int,
    *,
    ok_codes: Collection[int] = (0,),
    env: Mapping[str, str] | None = None,
    warmups: int = 1,
    timeout_s: float | None = None,
    inspect: Inspector | None = None,
    log: TextIO | None = sys.stderr,
) -> Result:
    """Warm up, then time `runs` runs of `command`; stop at the first failed run."""
    spec = Spec(tool, command, why_absent, ok_codes, env, inspect)
    result = _begin(spec, warmups, runs, log)
    for attempt in range(warmups + runs):
        if result.status != "ok":
            break
        _attempt(spec, result, attempt < warmups, timeout_s)
    return result


def measure_interleaved(
    specs: list[Spec],
    runs: int,
    *,
    warmups: int = 1,
    timeout_s: float | None = None,
    log: TextIO | None = sys.stderr,
) -> list[Result]:
    """`measure` for each spec, round-robin: every spec's warm-ups first, in order, then timed
    round after round, each round running every spec once. A spec that fails stops there; the
    others go on."""
    results = [_begin(spec, warmups, runs, log) for spec in specs]
    for attempt in range(warmups + runs):
        warm = attempt < warmups
        for spec, result in zip(specs, results, strict=True):
            if result.status == "ok":
                _attempt(spec, result, warm, timeout_s)
    return results


def _begin(spec: Spec, warmups: int, runs: int, log: TextIO | None) -> Result:
    result = Result(spec.tool, spec.command, env=dict(spec.env or {}))
    if spec.command is None:
        result.status, result.detail = "absent", spec.why_absent
        return result
    if log is not None:
        where = " ".join(f"{k}={v}" for k, v in result.env.items())
        print(
            f"{spec.tool}: {warmups} warm-up, then {runs} runs{' with ' + where if where else ''}",
            file=log,
        )
    return result


def _attempt(spec: Spec, result: Result, warm: bool, timeout_s: float | None) -> None:
    """One run of `spec` into `result`: a warm-up (not counted; the first one warms the page
    cache and its output is inspected) or a timed run. A failed run marks `result` failed."""
    assert spec.command is not None
    capture = warm and spec.inspect is not None
    run = run_once(spec.command, spec.env, capture=capture, timeout_s=timeout_s)
    if run.exit_code not in spec.ok_codes:
        why = f"timed out after {timeout_s:g} s" if run.timed_out else describe_exit(run.exit_code)
        if run.stderr_tail and not run.timed_out:
            why += f": {run.stderr_tail[:200]}"
        result.status, result.detail = "failed", why
        result.exit_codes.append(run.exit_code)
        return
    if warm:
        if spec.inspect is not None and run.stdout is not None:
            try:
                result.info = dict(spec.inspect(run.stdout))
            except ValueError as error:
                result.status, result.detail = "failed", f"unexpected output: {error}"
        return
    result.walls_s.append(run.wall_s)
    result.cpus_s.append(run.cpu_s)
    result.peaks_mib.append(run.peak_mib)
    result.exit_codes.append(run.exit_code)


def ratio(subject: Result, baseline: Result) -> float | None:
    """subject's median wall time over baseline's, when both were measured."""
    if subject.wall_s is None or not baseline.wall_s:
        return None
    return subject.wall_s / baseline.wall_s


def table(
    results: list[Result],
    *,
    title: str,
    ratio_label: str | None,
    ratios: Mapping[str, float],
    default_ratio: str = "",
    show_env: bool = False,
    show_codes: bool = False,
) -> list[str]:
    """One line per result: median wall, its range, median CPU time, median peak, and a ratio
    column (none when `ratio_label` is None), the variables set and the exit codes seen when
    asked."""
    width = max([24, *(len(r.tool) + 1 for r in results)])
    env_width = max([4, *(len(_env(r)) for r in results)]) if show_env else 0
    head = f"{'tool':<{width}}"
    if show_env:
        head += f" {'env':<{env_width}}"
    head += f" {'wall':>9} {'range':>15} {'cpu':>8} {'peak':>10}"
    if ratio_label is not None:
        head += f" {ratio_label:>9}"
    if show_codes:
        head += "  exit"
    lines = [title, head]
    for r in results:
        start = f"{r.tool:<{width}}"
        if show_env:
            start += f" {_env(r):<{env_width}}"
        if r.status != "ok":
            lines.append(f"{start} {r.status}: {r.detail}")
            continue
        spread = f"{min(r.walls_s):.3f}-{max(r.walls_s):.3f}"
        line = f"{start} {r.wall_s:>8.3f}s {spread:>15} {r.cpu_s:>7.3f}s {r.peak_mib:>6.1f} MiB"
        if ratio_label is not None:
            shown = f"{ratios[r.tool]:.1f}x" if r.tool in ratios else default_ratio
            line += f" {shown:>9}"
        if show_codes:
            line += "  " + ",".join(str(c) for c in sorted(set(r.exit_codes)))
        lines.append(line)
    return lines


def verdict_lines(verdicts: Mapping[str, bool | None]) -> list[str]:
    """PASS / MISS / SKIP (not measured here) per target."""
    marks = {True: "PASS", False: "MISS", None: "SKIP"}
    return [f"{marks[ok]}  {name}" for name, ok in verdicts.items()]


def _env(result: Result) -> str:
    return " ".join(f"{k}={v}" for k, v in result.env.items()) or "-"
