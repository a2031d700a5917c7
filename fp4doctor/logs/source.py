"""An engine log's lines, read with bounded memory and time, whatever the path names.

A log path is opened as every file fp4doctor reads from a place others can write
(fp4doctor/textfile.py): ``O_NONBLOCK`` (a FIFO opens at once instead of waiting for a writer),
then ``fstat`` on the open descriptor, and anything but a regular file is refused in one line:
a FIFO, ``/dev/zero`` or a socket never hangs the reader or fills memory. ``-`` reads stdin
(a pipe is what users mean there: ``docker logs c 2>&1 | fp4doctor verify-log -``).

The bytes are read in chunks and cut at ``\\n`` only: a ``\\r`` (progress bars) stays inside its
line, so line numbers are those of ``grep -n``. A line longer than `LINE_CAP` bytes keeps its
first `LINE_CAP` bytes (the rest is skipped as it streams by, and counted); at most `MAX_LINES`
lines are read (the count of what was left is reported). Memory is one chunk plus one line.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from fp4doctor.textfile import OPEN_FLAGS

LINE_CAP = 64 * 1024  # bytes kept of one line; vLLM's longest start-up line is a few KiB
MAX_LINES = 2_000_000  # lines read at most: a start-up log is thousands
_CHUNK = 256 * 1024
STDIN = "-"


class LogUnreadable(ValueError):
    """The log cannot be read: one line, starting with its path."""


@dataclass
class Tally:
    """What the reader left out, for the report."""

    lines: int = 0
    cut: int = 0  # lines longer than LINE_CAP (kept in part)
    binary: int = 0  # lines holding a NUL byte
    stopped: bool = False  # MAX_LINES reached: the rest of the log was not read
    timed_out: bool = False  # --follow: the time limit passed before a verdict
    notes: list[str] = field(default_factory=list)


def _readable(fd: int, timeout: float) -> bool:
    """Whether a read of the pipe `fd` would return at once (data, or its end)."""
    import select

    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    except (OSError, ValueError):
        return True  # let the read say what is wrong
    return bool(ready)


def open_log(path: str) -> int:
    """A descriptor for the log `path` (``-``: stdin); LogUnreadable for anything but a regular
    file (stdin may be a pipe or a terminal)."""
    if path == STDIN:
        return 0
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as exc:
        why = "not a regular file" if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP) else None
        raise LogUnreadable(f"{path}: {why or f'cannot read: {exc.strerror or exc}'}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a FIFO or device)"
        raise LogUnreadable(
            f"{path}: {what}; a log is read from a file, or from stdin with '-' "
            "(`docker logs C 2>&1 | fp4doctor verify-log -`)"
        )
    # A regular file is read blocking (O_NONBLOCK has no effect on it; clear it all the same).
    os.set_blocking(fd, True)
    return fd


def lines(
    fd: int,
    tally: Tally,
    *,
    follow: Callable[[], bool] | None = None,
    poll: float = 0.25,
    cap: int = LINE_CAP,
    max_lines: int = MAX_LINES,
) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes without the ``\\n``) for each line of `fd`, at most `cap` bytes each.

    With `follow`, end of file is not the end: the reader waits `poll` seconds and reads again
    (``tail -f``), until `follow()` says to stop; a partial last line is held until its ``\\n``
    comes (or the stop). A pipe is waited on with `select` (`poll` seconds at a time) and ends
    when its writer closes it."""
    held = bytearray()
    skipping = False  # inside a line already cut at `cap`
    number = 0
    regular = stat.S_ISREG(os.fstat(fd).st_mode)
    while True:
        if follow is not None and not regular and not _readable(fd, poll):
            if follow():
                continue  # nothing new on the pipe yet: ask again
            break
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:  # a non-blocking stdin
            chunk = b""
        except OSError as exc:
            raise LogUnreadable(f"cannot read: {exc.strerror or exc}") from None
        if not chunk:
            if follow is not None and regular and follow():
                time.sleep(poll)
                continue
            break  # a pipe at its end: its writer is gone
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not skipping:
                room = cap - len(held)
                if len(piece) > room:
                    held += piece[:room]
                    skipping = True
                    tally.cut += 1
                else:
                    held += piece
            if end < 0:
                break
            number += 1
            tally.lines = number
            yield number, bytes(held)
            held.clear()
            skipping = False
            start = end + 1
            if number >= max_lines:
                tally.stopped = True
                return
    if held or skipping:
        number += 1
        tally.lines = number
        yield number, bytes(held)
