"""Signals: by the names readers know, for reporting a child process that a signal ended; and
SIGTERM taken the way Ctrl-C is, so that a stopped command still ends its smoke workers."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

_terminated = False


def signal_name(number: int) -> str:
    """`SIGSEGV` for 11; `signal 77` for a number this platform has no name for."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM (what `kill`, systemd, Kubernetes and `timeout` send) raises
    KeyboardInterrupt as Ctrl-C does: the smoke workers sit in process groups of their own, out
    of reach of a signal to this process, and the path that Ctrl-C takes out of a run kills
    them (smoke/runner.py). `terminated()` then says it was SIGTERM. The handler before is put
    back on the way out; outside the main thread nothing changes."""
    global _terminated
    _terminated = False
    try:
        before = signal.signal(signal.SIGTERM, _sigterm)
    except ValueError:  # not the main thread: no handler can be set
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def terminated() -> bool:
    """Whether the KeyboardInterrupt being handled came from SIGTERM (`sigterm_interrupts`)."""
    return _terminated


def _sigterm(signum: int, frame: FrameType | None) -> None:
    global _terminated
    _terminated = True
    raise KeyboardInterrupt
