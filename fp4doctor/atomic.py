"""Write a file so that readers and other writers see either the old file or the new one, complete.

The text goes to a temporary file in the target's directory (created with ``O_EXCL``, mode
0o666 less the umask, like any new file), is flushed with ``fsync``, and only then takes the
target's name:

- ``overwrite=True``: ``os.replace``, atomic on POSIX; concurrent writers each install a
  complete file and the last one wins. When the target exists its permission bits are kept,
  as a plain rewrite would keep them.
- ``overwrite=False``: ``os.link`` of the temporary file to the target. ``link`` never
  replaces an existing name, so of two writers racing for the same new file exactly one
  succeeds and the other gets FileExistsError; checking first and renaming after would leave
  a window for both. On a file system without hard links, the target is created with
  ``O_EXCL`` and written in place: still only one writer can create it, but a reader may see
  it before it is complete.

Only a regular file is ever replaced. A rename takes the name whatever held it, so the target
is looked at (``lstat``) first: a directory, FIFO, socket or device (``-o /dev/full`` as root)
is refused with an OSError that says what it is, whatever ``overwrite`` says, and is left
untouched. A node put there in the instant between that look and the rename would still be
replaced: no portable rename refuses by file type.

A symbolic link is followed when it leads to a regular file, and that file is replaced
atomically, with the temporary file in the file's own directory (a rename cannot cross file
systems) and the link left as it is. That is what a user who keeps a config file behind a link
means by ``-o LINK --force``, what ``>`` in a shell and every editor do, and it leaves the link
working; replacing the link by a file, as this module once did, silently cut it off from
what it named. Any other link is refused with an error that names the link and its target: a
dangling link (creating a file through it is how a planted link makes a privileged writer
create a file elsewhere), a link to a directory or device, and a loop. A link in a shared
sticky directory such as /tmp that belongs to another user is refused too, the rule of the
kernel's ``fs.protected_symlinks``, so that ``-o /tmp/fp4.env --force`` as root cannot be
turned into writing /etc/passwd.

The path is taken as given (a string, or a path object): an empty name is refused with
FileNotFoundError rather than read as the current directory (``Path("")`` is ``.``), and a
name ending in ``/`` with IsADirectoryError rather than as the name before the slash (which
``Path`` would make of it): pass the user's string, not ``Path(string)``, to keep both
visible. A missing directory is named ("directory missing/dir does not exist"), and so is a
special file system such as /proc or /sys, where no file can be created: ``/proc/version``
is refused as not a regular file that can be replaced, not as "No such file".

On any failure the temporary file is removed and the target is left as it was. Errors are
OSError subclasses whose ``filename`` is the target path as given and whose ``strerror`` is a
message for a user (the CLI prints it after the path).
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
_MAX_LINK_HOPS = 40  # Linux's own limit (MAXSYMLINKS)


class NotRegularFile(OSError):
    """The target exists and is not a regular file, or is a link that does not lead to one."""


def write_atomic(path: str | os.PathLike[str], text: str, *, overwrite: bool) -> None:
    """Write `text` (UTF-8) to `path` atomically; refuse an existing `path` unless `overwrite`.

    Raises FileNotFoundError (empty name, missing directory), IsADirectoryError, NotRegularFile
    (a device, FIFO, socket, special file system or a link not followed), FileExistsError (the
    file exists and `overwrite` is false) or the OSError of the failing call.
    """
    name = os.fspath(path)
    _check_name(name)
    target = Path(name)
    data = text.encode("utf-8")
    try:
        _check_directory(target.parent)
        final, exists = _destination(target)
        if exists and not overwrite:
            raise FileExistsError(errno.EEXIST, "file exists (not overwritten)", name)
        tmp = _write_temp(final, data, exists)
        try:
            if overwrite:
                _keep_mode(final, tmp)
                os.replace(tmp, final)
            else:
                _link_new(tmp, final, data)
        finally:
            # Gone already after os.replace; after os.link the target holds the data.
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except OSError as exc:
        raise _about(exc, name) from exc
    _sync_directory(final.parent)


def _check_name(name: str) -> None:
    if not name:
        raise FileNotFoundError(errno.ENOENT, "the file name is empty", name)
    if name.endswith(os.sep):
        raise IsADirectoryError(
            errno.EISDIR, "the name ends with '/': it names a directory, not a file", name
        )
    if name.rpartition(os.sep)[2] in (".", ".."):
        raise IsADirectoryError(errno.EISDIR, "names a directory, not a file", name)


def _check_directory(directory: Path) -> None:
    """The directory must exist: say so in words, not as "No such file" about the target."""
    try:
        mode = os.stat(directory).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(
            errno.ENOENT, f"directory {directory} does not exist", str(directory)
        ) from None
    except NotADirectoryError:
        raise NotADirectoryError(
            errno.ENOTDIR, f"{directory} is not a directory (a part of it is a file)"
        ) from None
    if not stat.S_ISDIR(mode):
        raise NotADirectoryError(errno.ENOTDIR, f"{directory} is not a directory")


def _destination(target: Path) -> tuple[Path, bool]:
    """The regular file to replace (the target, or the file its link leads to) and whether it
    exists; raises for anything that is not a regular file."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return target, False
    if stat.S_ISREG(mode):
        return target, True
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file")
    if stat.S_ISLNK(mode):
        return _follow(target), True
    raise NotRegularFile(
        errno.EINVAL, f"is {_kind(mode)}, not a regular file: only a regular file is replaced"
    )


def _follow(link: Path) -> Path:
    """The regular file that `link` leads to, through at most 40 links, each one trusted."""
    first = os.readlink(link)
    current = link
    for hop in range(_MAX_LINK_HOPS):
        _check_trusted(current)
        current = Path(os.path.join(current.parent, os.readlink(current)))
        leads = f"is a symbolic link to {first}" + (f", then to {current}" if hop else "")
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            raise NotRegularFile(
                errno.ENOENT,
                f"{leads}, which does not exist: a file is never created through a link "
                "(name the file itself, or remove the link)",
            ) from None
        if stat.S_ISREG(mode):
            return current
        if not stat.S_ISLNK(mode):
            raise NotRegularFile(
                errno.EINVAL, f"{leads}, which is {_kind(mode)}, not a regular file; not followed"
            )
    raise NotRegularFile(errno.ELOOP, f"is a symbolic link to {first}, in a loop of links")


def _check_trusted(link: Path) -> None:
    """fs.protected_symlinks: in a sticky world-writable directory, follow only a link that
    belongs to us or to the directory's owner."""
    directory = os.stat(link.parent)
    shared = directory.st_mode & stat.S_ISVTX and directory.st_mode & stat.S_IWOTH
    owner = os.lstat(link).st_uid
    if shared and owner not in (os.geteuid(), directory.st_uid):
        raise NotRegularFile(
            errno.EACCES,
            f"is a symbolic link to {os.readlink(link)} owned by another user (uid {owner}) "
            f"in the shared directory {link.parent}; not followed (as fs.protected_symlinks "
            "would not follow it either)",
        )


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((what for test, what in kinds if test(mode)), "a special file")


def _write_temp(path: Path, data: bytes, exists: bool) -> Path:
    """A complete, synced copy of `data` under a fresh name next to `path`."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, _NEW_FILE_FLAGS, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise _cannot_create(exc, path.parent, exists) from exc
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


def _cannot_create(exc: OSError, directory: Path, exists: bool) -> OSError:
    """Say why no file can be created in `directory` where the bare error misleads: /proc
    answers ENOENT ("No such file") and /sys EACCES even to root."""
    if exc.errno == errno.EROFS:
        return OSError(exc.errno, f"{directory} is on a read-only file system")
    if exc.errno not in (errno.ENOENT, errno.EACCES, errno.EPERM):
        return exc
    try:
        special = os.statvfs(directory).f_blocks == 0  # proc, sysfs, cgroup: no blocks at all
    except OSError:
        special = False
    if not special:
        return exc
    where = f"{directory} is on a special file system (proc, sysfs, ...) where no file can be made"
    if exists:
        return NotRegularFile(exc.errno, f"not a regular file that can be replaced: {where}")
    return OSError(exc.errno, where)


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


def _about(exc: OSError, name: str) -> OSError:
    """The same kind of error, naming the target as given rather than a temporary file."""
    if exc.filename == name and exc.filename2 is None:
        return exc
    try:
        return type(exc)(exc.errno, exc.strerror or str(exc), name)
    except TypeError:  # a subclass with its own constructor
        return OSError(exc.errno, exc.strerror or str(exc), name)
