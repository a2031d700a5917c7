"""Signals by the names readers know, for reporting a child process that a signal ended."""

from __future__ import annotations

import signal


def signal_name(number: int) -> str:
    """`SIGSEGV` for 11; `signal 77` for a number this platform has no name for."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
