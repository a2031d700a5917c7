"""Write a file so that readers and other writers see either the old file or the new one, complete.

The text goes to a temporary file in the target's directory (created with ``O_EXCL``, mode
0o666 less the umask, like any new file), is flushed with ``fsync``, and only then takes the
target's name:

- ``overwrite=True``: ``os.replace``, atomic on POSIX; concurrent writers each install a
  complete file and the last one wins. When the target exists its permission bits are kept,
  as a plain rewrite would keep them. A symbolic link at the target is replaced by the new
  file, never followed.
- ``overwrite=False``: ``os.link`` of the temporary file to the target. ``link`` never
  replaces an existing name, so of two writers racing for the same new file exactly one
  succeeds and the other gets FileExistsError; checking first and renaming after would leave
  a window for both. On a file system without hard links, the target is created with
  ``O_EXCL`` and written in place: still only one writer can create it, but a reader may see
  it before it is complete.

On any failure the temporary file is removed and the target is left as it was. Errors are
OSError subclasses whose ``filename`` is the target path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

_NO_HARD_LINKS = frozenset(
    {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}
)
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def write_atomic(path: Path, text: str, *, overwrite: bool) -> None:
    """Write `text` (UTF-8) to `path` atomically; refuse an existing `path` unless `overwrite`."""
    path = Path(path)
    data = text.encode("utf-8")
    try:
        if not overwrite and os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "file exists (not overwritten)", str(path))
        tmp = _write_temp(path, data)
        try:
            if overwrite:
                _keep_mode(path, tmp)
                os.replace(tmp, path)
            else:
                _link_new(tmp, path, data)
        finally:
            # Gone already after os.replace; after os.link the target holds the data.
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except OSError as exc:
        raise _about(exc, path) from exc
    _sync_directory(path.parent)


def _write_temp(path: Path, data: bytes) -> Path:
    """A complete, synced copy of `data` under a fresh name next to `path`."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, _NEW_FILE_FLAGS, 0o666)
        except FileExistsError:
            continue
        _fill(fd, tmp, data)
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def _fill(fd: int, path: Path, data: bytes) -> None:
    """Write all of `data` to the new file `fd` at `path` and sync it, then close it; on any
    failure the half-written file is removed."""
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)


def _keep_mode(path: Path, tmp: Path) -> None:
    try:
        mode = os.stat(path, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        os.chmod(tmp, stat.S_IMODE(mode))


def _link_new(tmp: Path, path: Path, data: bytes) -> None:
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        _create_in_place(path, data)


def _create_in_place(path: Path, data: bytes) -> None:
    """Fallback without hard links: O_EXCL keeps it to one creator; remove it if writing fails."""
    _fill(os.open(path, _NEW_FILE_FLAGS, 0o666), path, data)


def _sync_directory(directory: Path) -> None:
    """Make the new name durable; best effort (not every file system can sync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _about(exc: OSError, path: Path) -> OSError:
    """The same kind of error, naming the target rather than a temporary file."""
    if exc.filename == str(path) and exc.filename2 is None:
        return exc
    try:
        return type(exc)(exc.errno, exc.strerror or str(exc), str(path))
    except TypeError:  # a subclass with its own constructor
        return OSError(exc.errno, exc.strerror or str(exc), str(path))
