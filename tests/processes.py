"""Test helpers for checking that no process outlives a run (smoke workers, their children)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path


def alive(pid: int) -> bool:
    """Running (a zombie or a missing process counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def still_alive(pids: Iterable[int], within_s: float = 5.0) -> list[int]:
    """The processes among `pids` still running after waiting up to `within_s` for them."""
    deadline = time.monotonic() + within_s
    pids = list(pids)
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
