"""What the command line starts before its own modules load: NVML, for a command that probes
this host.

`nvmlInit` and the first handle to each GPU are tens of milliseconds of driver work on a GPU
host (measured on an H200: see docs/performance.md), during which the calling thread does not
hold the interpreter lock. Begun in a thread first thing, it runs beside the imports of the command
line and the core (also tens of milliseconds) instead of after them. `probe_gpus` then calls
`nvmlInit` itself, which on an NVML already started counts one more user and returns (nvml.h:
"nvmlInit ... reference counted"), and reads everything as it would have; this module only
changes when the driver work happens, never what the probe sees. Any failure here is left for
`probe_gpus` to meet and report in its own words.

Only the standard library is imported here (`ctypes` only for a command that probes): the
`fp4doctor.probe` package would load the facts and half the probe first.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Sequence

#: The commands that probe this host (unless they read a facts file instead).
PROBING = frozenset({"check", "env", "config", "explain", "probe", "advisories", "node"})
#: The library that nvidia-ml-py loads on Linux (pynvml `_LoadNvmlLibrary`), by the same name,
#: so that both get the one copy the dynamic loader keeps.
NVML_LIBRARY = "libnvidia-ml.so.1"
#: At exit, how long to wait for a start-up still in the driver (a command that stopped early,
#: a usage error), so that the process does not exit while a thread is inside libnvidia-ml.
EXIT_WAIT_S = 5.0


def probes_this_host(argv: Sequence[str]) -> bool:
    """Whether `argv` (`sys.argv`) is fp4doctor's command line, the console script's or
    `python -m fp4doctor`'s, for a command that probes this host."""
    program = argv[0] if argv else ""
    if os.path.basename(program) != "fp4doctor" and not program.endswith(
        os.path.join("fp4doctor", "__main__.py")
    ):
        return False  # the module imported by something else (a test runner, a user's script)
    words = [arg for arg in argv[1:] if not arg.startswith("-")]
    if not words or words[0] not in PROBING:
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
