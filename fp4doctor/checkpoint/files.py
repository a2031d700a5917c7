"""Opening a checkpoint's files as an attacker may have laid them out: only regular files inside
the model directory, never waited on, their JSON read to one clear error.

A checkpoint is often someone else's download, and fp4doctor often runs as root. So:

- every file read must resolve (links followed) inside the model directory, or, for a snapshot
  of the Hugging Face cache (`models--ORG--NAME/snapshots/REV/`), inside the repository folder
  whose `blobs/` its links lead to. The index's `weight_map` naming `/etc/shadow`, `../x` or a
  link out of the directory is refused before anything outside is opened, so that no error
  message (a header length is the file's first 8 bytes) can carry a byte of a foreign file;
- a name that is not a regular file (a FIFO named `model.safetensors`, a device) is refused,
  not opened: opening a FIFO blocks until a writer comes. The open itself is non-blocking and
  checked with `fstat`, for a name swapped after the look (as `profile/cache.py` does);
- JSON nested too deeply for Python's parser (`RecursionError`) or holding an integer over
  Python's 4,300-digit conversion limit (`ValueError`) is a CheckpointError like any bad JSON.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path, PurePosixPath
from typing import IO, Any

from fp4doctor.checkpoint.errors import CheckpointError

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def boundary(root: Path) -> Path:
    """The directory every file of the checkpoint in `root` must resolve into: `root` itself,
    or the repository folder of a Hugging Face cache snapshot (its files are links to
    `../../blobs/`, huggingface_hub's `file_download.py`)."""
    for where in (Path(os.path.abspath(root)), Path(os.path.realpath(root))):
        if where.parent.name == "snapshots" and where.parent.parent.name.startswith("models--"):
            return Path(os.path.realpath(where.parent.parent))
    return Path(os.path.realpath(root))


def shard(root: Path, name: str, within: Path, named_by: Path) -> Path:
    """The file the index `named_by` names `name`: refused unless a plain relative path that
    resolves inside `within`."""
    parts = PurePosixPath(name).parts
    if not name or "\0" in name or PurePosixPath(name).is_absolute() or ".." in parts:
        raise CheckpointError(
            f"{named_by}: 'weight_map' names the shard {name!r}, outside the model directory: "
            "refused (a shard is a file name inside the checkpoint's directory)"
        )
    return inside(root / name, within)


def inside(path: Path, within: Path) -> Path:
    """`path`, when it resolves (links followed) inside `within`; else a CheckpointError that
    names `path` alone (where it leads may be a file that is none of the user's business)."""
    real = Path(os.path.realpath(path))
    if real != within and within not in real.parents:
        raise CheckpointError(
            f"{path}: leads outside the model directory {within} (a symbolic link?): refused; "
            "fp4doctor reads a checkpoint's files only inside its directory"
        )
    return path


def is_regular(path: Path) -> bool:
    """A regular file (links followed), without opening it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def open_regular(path: Path) -> IO[bytes]:
    """`path` open for reading, if it is a regular file: never a FIFO or device, never waited
    on. Raises CheckpointError."""
    if not is_regular(path) and os.path.lexists(path):
        raise CheckpointError(f"{path}: not a regular file (a FIFO, device or directory): not read")
    try:
        handle = open(os.open(path, _READ_FLAGS), "rb")  # noqa: SIM115 (the caller closes it)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped since the look above
        handle.close()
        raise CheckpointError(f"{path}: not a regular file (a FIFO, device or directory): not read")
    return handle


def read_bytes(path: Path, limit: int, what: str) -> bytes:
    """The whole of a small file, refused over `limit` bytes."""
    with open_regular(path) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise CheckpointError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise CheckpointError(f"{path}: over {limit} bytes; not {what}")
    return data


def parse_json(data: bytes, path: Path, what: str) -> Any:
    """`data` (UTF-8 JSON) parsed; a CheckpointError naming `path` and saying why it is not
    `what` (e.g. "a config file") otherwise."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: not UTF-8 JSON ({exc}); not {what}") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc}); not {what}") from None
    except RecursionError:
        raise CheckpointError(f"{path}: JSON nested too deeply to be {what}") from None
    except ValueError:  # int(): Python's limit on the digits of an integer (4,300 by default)
        raise CheckpointError(
            f"{path}: holds an integer too long to read (over {_MAX_DIGITS()} digits); not {what}"
        ) from None


# Python 3.10.7+ and 3.11 limit int() to 4,300 digits (CVE-2020-10735); earlier 3.10s do not.
_MAX_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 4300)
