"""Parsed profiles kept between runs, so that a profile file is parsed once per version (and
what is computed from them alone: the packages every shipped profile reads, for the probe).
Outside the profile package so that the probe reads an entry without importing it.

Importing the YAML library and parsing vLLM's profile and its modules is about a fifth of
`fp4doctor check --no-smoke` (30 ms of 145 on a CPU host). A parsed profile is kept as a pickle
in the cache directory: `$FP4DOCTOR_CACHE_DIR`, else `$XDG_CACHE_HOME/fp4doctor`, else
`~/.cache/fp4doctor`; `FP4DOCTOR_CACHE_DIR=` (empty) turns the cache off. Nothing else is kept:
the host is probed and judged on every run.

An entry is used only while everything it was built from is unchanged: each file read (the
profile, the modules it includes, the advisories), compared by content, and the code that builds
it (fp4doctor's version, the size and modification time of each of fp4doctor's files that
shapes the result, `CODE`; Python, packaging and PyYAML). The entry keeps the files' bytes
(about 130 KB for vLLM's) rather than a hash of them: a file rewritten within one tick of the
file system's clock is still seen, and no hash library loads (OpenSSL's, through `hashlib`, was
3 ms of every run on the CPU host).
A pickle runs code when it is loaded, as a `.pyc` does, so an entry is read only from a
directory and a file this user owns and no one else can write. Anything unexpected (no home, a
read-only or foreign directory, a damaged entry, a race with another run) means the profile is
parsed as if there were no cache, in silence; a name in the directory that is not a regular
file is never replaced, and no directory is made inside one that belongs to another user
(`sudo -E`, which keeps the user's HOME for root).
"""

from __future__ import annotations

import functools
import os
import stat
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from fp4doctor import __version__

T = TypeVar("T")

CACHE_DIR_ENV = "FP4DOCTOR_CACHE_DIR"
FORMAT = 2  # bump when what an entry holds changes shape


def directory() -> Path | None:
    """The cache directory this run uses, or None when the cache is off."""
    chosen = os.environ.get(CACHE_DIR_ENV)
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if base.startswith("~"):
        return None  # no home directory to expand
    return Path(base) / "fp4doctor"


def cached(kind: str, source: str, build: Callable[[], tuple[T, list[str]]]) -> T:
    """`build()`'s value for the file `source`, from the cache while it is current. `build`
    returns the value and the other files it read; what it raises is raised, not kept."""
    where = directory()
    if where is None:
        return build()[0]
    key = f"{kind}\0{os.path.abspath(source)}"
    # The name is a checksum of the key; the entry keeps the key itself, so two keys with one
    # name only take each other's place.
    entry = where / f"{kind}-{zlib.crc32(key.encode('utf-8', 'surrogateescape')):08x}.pickle"
    found = _read(entry, key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    first = _content(source)  # before the build: a file edited meanwhile is not taken as read
    value, read = build()
    files = [first, *(_content(p) for p in read)]
    if None not in files:
        _write(entry, (FORMAT, _code(), key, tuple(files), value))
    return value


def _content(path: str) -> tuple[str, bytes] | None:
    """The file's absolute path and bytes; None for what is not a regular file (a device, a
    FIFO: never read here, and the parser refuses them) or cannot be read."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOSE_ON_EXEC), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return os.path.abspath(path), handle.read()
    except OSError:
        return None


# What a parsed profile or advisory list is built by, or holds the classes of, besides the files
# it reads: the profile package, its kinds and schema, the version ranges (versions.py), the
# facts types the conditions name (facts.py), the reading of text (textfile.py) and the place of
# the shipped profiles (shipped.py), and this module, which keeps them. tests/test_profile_cache.py
# checks this list against the modules a parse of every shipped file imports.
CODE = (
    "__init__.py",
    "cache.py",
    "deployment.py",
    "facts.py",
    "released.py",
    "shipped.py",
    "textfile.py",
    "versions.py",
    "profile/*.py",
    "profile/kinds/*.py",
    "coldstart/rules.py",  # the cold-start rules (profiles/coldstart.yaml) are kept here too
    "settle.py",  # and the engines' defaults (profiles/deployment.yaml)
)


def code_files() -> list[Path]:
    """fp4doctor's own files that shape a parsed entry (`CODE`), as installed now."""
    package = Path(__file__).resolve().parent
    return sorted(f for pattern in CODE for f in package.glob(pattern))


@functools.cache
def _code() -> tuple[object, ...]:
    """What the parsed objects depend on besides the files: the code that builds them."""
    libraries = [_origin(name) or "" for name in ("packaging", "yaml")]  # as installed now
    return (
        __version__,
        sys.version,
        *(_stat(str(f)) for f in code_files()),
        *map(_stat, libraries),
    )


def _stat(path: str) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return path, st.st_size, st.st_mtime_ns


def _origin(module: str) -> str | None:
    """Where `module` would be imported from, without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None else None


def _private(st: os.stat_result) -> bool:
    """Owned by this (effective) user, and no one else can write it."""
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _ours_to_make(directory: Path) -> bool:
    """`directory` exists, or the nearest directory above it that exists is this user's. Under
    `sudo -E` HOME is another user's: a root-owned `~/.cache` made there would stand in that
    user's way (their own tools could not write their cache), so nothing is made there."""
    for where in (directory, *directory.parents):
        try:
            st = os.stat(where)
        except FileNotFoundError:
            continue
        return where == directory or st.st_uid == os.geteuid()
    return False


def _read(entry: Path, key: str) -> Any | None:
    """The entry's value when it is `key`'s and current, else None."""
    import pickle

    try:
        where = os.lstat(entry.parent)
        if not stat.S_ISDIR(where.st_mode) or not _private(where):
            return None
        if not stat.S_ISREG(os.lstat(entry).st_mode):
            return None
        # Non-blocking: a FIFO put there after that look must not hang the doctor.
        with open(os.open(entry, os.O_RDONLY | os.O_NONBLOCK | _NO_FOLLOW), "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode) or not _private(st):
                return None
            fmt, code, kept, files, value = pickle.load(handle)
    except Exception:  # absent, damaged, truncated, or another layout: parse again
        return None
    if fmt != FORMAT or code != _code() or kept != key:
        return None
    if any(_content(path) != (path, data) for path, data in files):
        return None
    return value


def _write(entry: Path, content: tuple[object, ...]) -> None:
    """Keep `content` at `entry` (a new file, then a rename); any failure keeps nothing."""
    import pickle
    import secrets

    try:
        if not _ours_to_make(entry.parent):
            return
        entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        where = os.lstat(entry.parent)
        if not stat.S_ISDIR(where.st_mode) or not _private(where):
            return
        if os.path.lexists(entry) and not stat.S_ISREG(os.lstat(entry).st_mode):
            return  # never replace what is not a regular file
        data = pickle.dumps(content, protocol=pickle.HIGHEST_PROTOCOL)
        temporary = entry.with_name(f".{entry.name}.{secrets.token_hex(8)}")
        fd = os.open(temporary, _NEW_FILE, 0o600)
        try:
            with open(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, entry)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    except Exception:  # a cache that cannot be written is no cache
        return


_CLOSE_ON_EXEC = getattr(os, "O_CLOEXEC", 0)
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | _CLOSE_ON_EXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW
