"""Reading the files users hand us (profiles, facts snapshots) as UTF-8 text, and the files
others can write that fp4doctor looks into (the cold-start caches: vLLM's autotune files,
FlashInfer's managed store, prebuilt and JIT-built modules), with one message per way it can
fail; each caller raises it as its own error type or keeps it as a value.

Only a regular file is read, and at most `limit` bytes of it (4 MiB unless the caller says
otherwise; a facts snapshot or a profile is a few KiB). Both rules exist because a path on the
command line can name anything: ``--facts /dev/zero`` once read until memory ran out, and
``--facts`` on a FIFO with no writer blocked forever in ``open``. So the file is opened with
``O_NONBLOCK`` (a FIFO then opens at once instead of waiting for a writer; a regular file
ignores the flag) and ``O_NOCTTY``, the open descriptor is checked with ``fstat`` (checking the
path first would race with a swap), anything that is not a regular file is refused, and at
most ``limit + 1`` bytes are read, whatever ``st_size`` says (files in /proc report 0, a sparse
file any size).

Pipes are refused with the rest: ``--facts /dev/stdin`` fed by a pipe (``probe --json |
check --facts /dev/stdin``) and process substitution ``<(...)`` are FIFOs, so they end with
"not a regular file" instead of being read; save the snapshot to a file first. (A
``/dev/stdin`` that a shell redirected from a regular file *is* that regular file, and is read
like any other.)
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

DEFAULT_LIMIT = 4 * 1024 * 1024
_CHUNK = 1024 * 1024
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class UnreadableText(ValueError):
    """The file cannot be read, or is not UTF-8; the message starts with its path."""


def read_text(path: str | Path, *, limit: int = DEFAULT_LIMIT) -> str:
    """The UTF-8 text of the regular file `path`, of at most `limit` bytes.

    Raises UnreadableText, one line starting with the path, for a file that cannot be opened,
    a directory ("is a directory"), anything else that is not a regular file ("not a regular
    file", FIFOs, devices, sockets and piped /dev/stdin included), a file larger than `limit`
    ("larger than N bytes") and text that is not UTF-8.
    """
    p = Path(path)
    raw = read_bytes(p, limit=limit, too_large=_USER_FILE_HINT, not_regular=_PIPE_HINT)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableText(f"{p}: not UTF-8 text (byte {exc.start})") from None


_USER_FILE_HINT = "a facts snapshot or a profile is far smaller (is it the right file?)"
_PIPE_HINT = "pipes, devices and /dev/stdin are not read: save the content to a file and name that"


def read_bytes(
    path: str | os.PathLike[str], *, limit: int, too_large: str = "", not_regular: str = "not read"
) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them, never waited on (a FIFO
    opens at once and is refused), never read past `limit + 1` bytes (a link to /dev/zero).

    Raises UnreadableText as `read_text` does; `too_large` and `not_regular` end those two
    messages. A cache reader keeps the message as a value ("not a regular file (a FIFO or
    pipe); not read").
    """
    p = Path(path)
    try:
        fd = os.open(p, OPEN_FLAGS)
    except OSError as exc:
        raise UnreadableText(f"{p}: {_why_not_opened(p, exc)}") from None
    try:
        return read_open(fd, p, limit, too_large, not_regular)
    except OSError as exc:
        raise UnreadableText(f"{p}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def check_regular(fd: int, p: str | Path, not_regular: str = "not read") -> None:
    """Raise UnreadableText unless the open descriptor `fd` is a regular file (checked on the
    descriptor, not the path: a name swapped after a look is still caught)."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise UnreadableText(f"{p}: is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise UnreadableText(f"{p}: not a regular file ({_kind(mode)}); {not_regular}")


def open_regular(path: str | os.PathLike[str]) -> int:
    """A descriptor open for reading on the regular file `path` (the caller closes it); never
    blocks on a FIFO. Raises UnreadableText."""
    p = Path(path)
    try:
        fd = os.open(p, OPEN_FLAGS)
    except OSError as exc:
        raise UnreadableText(f"{p}: {_why_not_opened(p, exc)}") from None
    try:
        check_regular(fd, p)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_open(
    fd: int, p: str | Path, limit: int, too_large: str = "", not_regular: str = "not read"
) -> bytes:
    """`read_bytes` of a descriptor the caller opened (with `OPEN_FLAGS`) and closes."""
    check_regular(fd, p, not_regular)
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise UnreadableText(
            f"{p}: larger than {limit} bytes" + (f"; {too_large}" if too_large else "")
        )
    return b"".join(chunks)


def _why_not_opened(p: Path, exc: OSError) -> str:
    """A socket cannot be opened at all (ENXIO): say what it is rather than "No such device"."""
    if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):
        try:
            mode = os.stat(p).st_mode
        except OSError:
            pass
        else:
            if not stat.S_ISREG(mode):
                return f"not a regular file ({_kind(mode)})"
    return f"cannot read: {exc.strerror or exc}"


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISFIFO, "a FIFO or pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((what for test, what in kinds if test(mode)), "a special file")
