"""Which libcudart.so.N majors this process could load, read from file names only.

cudnn-frontend's Python wheels (1.12.0 to 1.24.1) open the CUDA runtime with
`dlopen("libcudart.so.12")` and then `dlopen("libcudart.so.13")`, and throw "Multiple libcudart
libraries found" when both succeed; 1.19.0 tries only `libcudart.so.13` and throws "Unable to load
any libcudart.so.* library" on a CUDA 12 host (include/cudnn_frontend_shim.h `load_cudart_so`,
cudnn-frontend issues #207, #211, #267; 1.25.0 warns and takes the first, or the library
`CUDNN_FRONTEND_CUDART_LIB_NAME` names, PR #270). So what matters is which majors a `dlopen` by
soname would find: the copies on the loader's own search path (`LD_LIBRARY_PATH`, then the
ld.so.cache that `ldconfig` builds from /etc/ld.so.conf, which is where a system toolkit
registers itself), plus any copy already loaded in the process (torch loads the runtime of its
own CUDA build, from the nvidia-cuda-runtime wheel or the system).

This module lists every copy it can see, with where it was found; the `cudart_loader` rule
decides which of them count. It opens no library, runs nothing (no `ldconfig -p`), and reads the
ld.so.cache's own format (glibc's `glibc-ld.so.cache1.1`, the only format glibc writes since 2.32)
with the standard library. Directories compiled into the loader (/lib64, /usr/lib64) are not
listed separately: every distribution's ldconfig puts their libraries in the cache too.
"""

from __future__ import annotations

import os
import re
import struct
import sys
from collections.abc import Iterable, Mapping

from fp4doctor.facts import (
    CUDART_LD_LIBRARY_PATH,
    CUDART_LDCONFIG,
    CUDART_TOOLKIT,
    CUDART_WHEEL,
    CudartFacts,
    CudartLibrary,
)
from fp4doctor.textfile import OPEN_FLAGS, read_open

__all__ = ["LD_SO_CACHE", "ldconfig_cache", "probe_cudart"]

LD_SO_CACHE = "/etc/ld.so.cache"
CACHE_MAGIC = b"glibc-ld.so.cache1.1"
CACHE_HEADER = struct.Struct("<II")  # nlibs, len_strings (after the 20-byte magic)
CACHE_ENTRY = struct.Struct("<iIIIQ")  # flags, key, value, osversion, hwcap
CACHE_ENTRIES_AT = 48  # the new-format header's size
MAX_CACHE = 64 << 20  # a cache larger than this is not one

_SONAME_BYTES = re.compile(rb"libcudart\.so\.(\d+)\0")
FILE_NAME = re.compile(r"libcudart\.so\.(\d+)(?:\.\d+)*")
# Where the runtime wheels install it: nvidia-cuda-runtime-cu12 (12.x), nvidia-cuda-runtime (13.x).
WHEEL_DIRS = ("nvidia/cuda_runtime/lib", "nvidia/cu13/lib")
DEFAULT_TOOLKIT = "/usr/local/cuda"  # where the toolchain probe looks last, too


def probe_cudart(
    environ: Mapping[str, str],
    search: Iterable[str] | None = None,
    cache: str = LD_SO_CACHE,
    cuda_home: str | None = None,
) -> CudartFacts:
    """Every libcudart.so.N under `LD_LIBRARY_PATH`, in the ld.so.cache, in the runtime wheels
    of `search` (default: `sys.path`) and in the toolkit (`cuda_home`, else `CUDA_HOME`,
    `CUDA_PATH` or /usr/local/cuda); never raises (what could not be read is in `error`)."""
    found: dict[tuple[str, str], CudartLibrary] = {}
    errors: list[str] = []

    def add(major: int, path: str, origin: str) -> None:
        found.setdefault((origin, path), CudartLibrary(major, path, origin))

    for entry in environ.get("LD_LIBRARY_PATH", "").split(":"):
        if entry:  # an empty entry is the current directory to glibc: not a place a runtime lives
            for major, path in _in_directory(entry):
                add(major, path, CUDART_LD_LIBRARY_PATH)
    try:
        for major, path in ldconfig_cache(cache):
            add(major, path, CUDART_LDCONFIG)
    except FileNotFoundError:
        pass  # no cache (musl, a scratch container): nothing registered
    except (OSError, ValueError) as exc:
        errors.append(f"{cache}: {exc}")
    for base in sys.path if search is None else search:
        for sub in WHEEL_DIRS:
            for major, path in _in_directory(os.path.join(base or ".", sub)):
                add(major, path, CUDART_WHEEL)
    home = cuda_home or environ.get("CUDA_HOME") or environ.get("CUDA_PATH") or DEFAULT_TOOLKIT
    seen: set[str] = set()
    for sub in ("lib64", "lib"):  # often one a link to the other: listed once
        directory = os.path.join(home, sub)
        if os.path.realpath(directory) not in seen:
            seen.add(os.path.realpath(directory))
            for major, path in _in_directory(directory):
                add(major, path, CUDART_TOOLKIT)
    libraries = sorted(found.values(), key=lambda lib: (lib.major, lib.origin, lib.path))
    return CudartFacts(libraries=libraries, error="; ".join(errors) or None)


def _in_directory(directory: str) -> list[tuple[int, str]]:
    """(major, path) of the libcudart files in `directory`, one per major (the soname link
    `libcudart.so.12` before `libcudart.so.12.8.90`); nothing for a missing directory."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    best: dict[int, str] = {}
    for name in sorted(names, key=len):  # the shortest name of a major is its soname
        match = FILE_NAME.fullmatch(name)
        if match:
            best.setdefault(int(match.group(1)), os.path.join(directory, name))
    return sorted(best.items())


def ldconfig_cache(path: str | os.PathLike[str] = LD_SO_CACHE) -> list[tuple[int, str]]:
    """(major, path) of each libcudart.so.N entry of a glibc ld.so.cache. Raises OSError when
    the file cannot be read and ValueError when it is not a cache this reader knows."""
    fd = os.open(path, OPEN_FLAGS)  # never waits on a FIFO; a missing cache is FileNotFoundError
    try:
        data = read_open(fd, os.fspath(path), MAX_CACHE, "not an ld.so.cache")
    finally:
        os.close(fd)
    base = data.find(CACHE_MAGIC)  # after an old-format (libc5) block, in caches before 2.32
    if base < 0:
        raise ValueError("not a glibc ld.so.cache (no 'glibc-ld.so.cache1.1' header)")
    if base + CACHE_ENTRIES_AT > len(data):
        raise ValueError("truncated ld.so.cache header")
    nlibs, _strings = CACHE_HEADER.unpack_from(data, base + len(CACHE_MAGIC))
    start = base + CACHE_ENTRIES_AT
    end = start + nlibs * CACHE_ENTRY.size
    if end > len(data):
        raise ValueError("truncated ld.so.cache: its entries run past the end")
    # Where a "libcudart.so.N" string starts, relative to the header: only entries whose key
    # points there are decoded (a cache holds hundreds of libraries; most hosts no libcudart).
    sonames = {m.start() - base: int(m.group(1)) for m in _SONAME_BYTES.finditer(data)}
    out = []
    for _flags, key, value, _os, _hwcap in CACHE_ENTRY.iter_unpack(data[start:end]):
        if key in sonames:
            out.append((sonames[key], _string(data, base + value)))
    return sorted(set(out))


def _string(data: bytes, at: int) -> str:
    """The NUL-terminated string at `at` (empty when `at` lies outside the file)."""
    if not 0 <= at < len(data):
        return ""
    end = data.find(b"\0", at)
    return data[at : end if end >= 0 else len(data)].decode("latin-1")
