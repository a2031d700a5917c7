"""What the command line sets up before its own modules load: NVML, for a command that probes
this host, and the cyclic garbage collector held off for the life of the process.

`nvmlInit` and the first handle to each GPU are tens of milliseconds of driver work on a GPU
host (measured on an H200: see docs/performance.md), during which the calling thread does not
hold the interpreter lock. Begun in a thread first thing, it runs beside the imports of the command
line and the core (also tens of milliseconds) instead of after them. `probe_gpus` then calls
`nvmlInit` itself, which on an NVML already started counts one more user and returns (nvml.h:
"nvmlInit ... reference counted"), and reads everything as it would have; this module only
changes when the driver work happens, never what the probe sees. Any failure here is left for
`probe_gpus` to meet and report in its own words.

The collector: fp4doctor's modules build thousands of objects while they load (the profiles, the
dataclasses' generated methods) and the collector walks them again and again as they do, then
once more in the collection the interpreter runs at exit. A command ends within seconds, and what
it makes is freed by reference counting: a whole `check` leaves about 500 small objects in cycles,
and its peak memory is the same with the collector off (26 MiB). So the command line switches the
collector off first thing (`hold_gc`) and freezes what is left just before the exit
(`before_exit`), which the exit's collection then skips: `check --no-smoke` 134 -> 112 ms and
`probe --json` 89 -> 74 ms on the CPU host, 267 -> 235 ms and 168 -> 146 ms on an H200
(docs/performance.md). Only fp4doctor's own command line does this, and not for `fleet`, which
can wait on a cluster with Ray's client in the process: a program that imports fp4doctor keeps
its collector as it was.

Only the standard library is imported here (`ctypes` only for a command that probes): the
`fp4doctor.probe` package would load the facts and half the probe first.
"""

from __future__ import annotations

import atexit
import gc
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

#: The commands that probe this host (unless they read a facts file instead).
PROBING = frozenset(
    {"check", "env", "config", "explain", "probe", "advisories", "node", "diff", "verify-log"}
)
#: The commands that keep the garbage collector on: `fleet --ray` waits on a cluster for up to
#: its --timeout with Ray's client running in this process.
KEEP_COLLECTOR = frozenset({"fleet"})
#: The library that nvidia-ml-py loads on Linux (pynvml `_LoadNvmlLibrary`), by the same name,
#: so that both get the one copy the dynamic loader keeps.
NVML_LIBRARY = "libnvidia-ml.so.1"
#: At exit, how long to wait for a start-up still in the driver (a command that stopped early,
#: a usage error), so that the process does not exit while a thread is inside libnvidia-ml.
EXIT_WAIT_S = 5.0

_held = False  # whether `hold_gc` switched the collector off


def is_the_command_line(argv: Sequence[str]) -> bool:
    """Whether `argv` (`sys.argv`) is fp4doctor's command line, the console script's or
    `python -m fp4doctor`'s, and not the module imported by something else (a test runner, a
    user's script)."""
    program = argv[0] if argv else ""
    return os.path.basename(program) == "fp4doctor" or program.endswith(
        os.path.join("fp4doctor", "__main__.py")
    )


def _command(argv: Sequence[str]) -> str | None:
    """The command `argv` names (its first word that is not an option), if any."""
    return next((arg for arg in argv[1:] if not arg.startswith("-")), None)


def probes_this_host(argv: Sequence[str]) -> bool:
    """Whether `argv` (`sys.argv`) is fp4doctor's command line for a command that probes this
    host."""
    if not is_the_command_line(argv) or _command(argv) not in PROBING:
        return False
    return not any(
        arg in ("-h", "--help", "--facts") or arg.startswith("--facts=") for arg in argv[1:]
    )


def begin_nvml(argv: Sequence[str]) -> threading.Thread | None:
    """For `argv` (`sys.argv`) that probes this host, start NVML in a thread; the thread, or
    None."""
    if not probes_this_host(argv):
        return None
    thread = threading.Thread(target=_start_nvml, name="fp4doctor-nvml-start", daemon=True)
    thread.start()
    atexit.register(thread.join, EXIT_WAIT_S)
    return thread


def _start_nvml() -> None:
    """`nvmlInit`, then a handle to each GPU: the first handle to a GPU attaches to it in the
    driver (most of NVML's cost after `nvmlInit`), later ones find it attached."""
    import ctypes  # here: `--version`, `profiles` and `--help` never need it

    try:
        nvml = ctypes.CDLL(NVML_LIBRARY)
        count, handle = ctypes.c_uint(), ctypes.c_void_p()
        if nvml.nvmlInit_v2() != 0 or nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return
        for index in range(count.value):
            nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle))
    except (OSError, AttributeError):  # no driver here: probe_gpus says so
        return


def hold_gc(argv: Sequence[str]) -> bool:
    """For fp4doctor's own command line (but `KEEP_COLLECTOR`'s commands), switch the cyclic
    garbage collector off until the process exits; whether it did."""
    global _held
    if not is_the_command_line(argv) or _command(argv) in KEEP_COLLECTOR or not gc.isenabled():
        return False
    gc.disable()
    _held = True
    return True


def before_exit() -> None:
    """Last thing before the command line exits: freeze every object, so that the interpreter's
    collection at exit does not walk them. Only where `hold_gc` held the collector: a program
    that called the command line in-process (a test's CliRunner) keeps collecting them."""
    if _held:
        gc.freeze()


def _interrupted_while_loading(signum: int, frame: object) -> None:
    # An exception raised here can land where Python ignores it (an import lock's callback):
    # exit at once instead; nothing has been written or started yet.
    sys.stderr.write("fp4doctor: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


_sigint_before: Any = None


def begin(argv: Sequence[str]) -> None:
    """First thing the command line does, before its modules load: Ctrl-C from here until
    `loaded` is one line and exit code 130 (not a traceback), NVML starts for a command that
    probes this host, and the collector is held off (`hold_gc`)."""
    global _sigint_before
    before = signal.getsignal(signal.SIGINT)
    if before is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, _interrupted_while_loading)
            _sigint_before = before
        except ValueError:  # imported outside the main thread: nothing to guard
            pass
    begin_nvml(argv)
    hold_gc(argv)


def loaded() -> None:
    """The modules are loaded: Python's own Ctrl-C handler is back, and from here on the command
    group turns Ctrl-C into exit code 130."""
    if _sigint_before is not None and signal.getsignal(signal.SIGINT) is _interrupted_while_loading:
        signal.signal(signal.SIGINT, _sigint_before)
