"""When each part of `fp4doctor check` starts and ends, in one real run (threads included).

    python benchmarks/startup_timeline.py check --no-smoke --target vllm

Wraps the probe parts, the profile load and the rules with timers, then runs the command line
as `fp4doctor` would; the timeline (ms since the interpreter started this script) goes to
stderr after the command's own output. Run with bytecode compiled.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

T0 = time.perf_counter()
EVENTS: list[tuple[float, float, str, str]] = []


def timed(module: Any, name: str) -> None:
    original: Callable[..., Any] = getattr(module, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            end, thread = time.perf_counter(), threading.current_thread().name
            EVENTS.append((start - T0, end - T0, thread, f"{module.__name__}.{name}"))

    setattr(module, name, wrapper)


def main() -> int:
    sys.argv[0] = "fp4doctor"  # the console script's name: the command line starts NVML early
    import fp4doctor.cli as cli

    EVENTS.append((0.0, time.perf_counter() - T0, "MainThread", "import fp4doctor.cli"))
    import fp4doctor.doctor as doctor
    import fp4doctor.probe as probe
    import fp4doctor.profile as profile

    EVENTS.append((0.0, time.perf_counter() - T0, "MainThread", "+ doctor, probe, profile"))
    parts = ("probe_packages", "probe_cudnn", "probe_toolchain", "with_triton", "engine_modules",
             "probe_compiled_archs", "probe_gpus", "probe_environment", "probe_cudart",
             "probe_host", "with_packages", "with_compiled_archs")  # fmt: skip
    for part in parts:
        timed(probe, part)
    timed(profile, "load")
    timed(doctor, "evaluate")
    timed(doctor, "resolve")
    timed(doctor, "diagnose")
    with contextlib.suppress(SystemExit):
        cli.main(sys.argv[1:], prog_name="fp4doctor", standalone_mode=False)
    EVENTS.append((0.0, time.perf_counter() - T0, "MainThread", "end"))
    for start, end, thread, what in sorted(EVENTS):
        print(
            f"{start * 1e3:7.1f} {end * 1e3:7.1f} {(end - start) * 1e3:6.1f} ms  "
            f"{thread[:16]:16} {what}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
