"""The cuDNN backend that cudnn-frontend would load, and the one torch would load.

Only the backend version matters to cuDNN's FP4 GEMM (`cudnn.backend_version()`), and it is
read where the library itself says it: `cudnnGetVersion` through `ctypes`, on the file found by
the same search as cudnn-frontend's `_dlopen_cudnn` (python/cudnn/__init__.py, 1.32):

1. each `LD_LIBRARY_PATH` directory, for `libcudnn.so.9` then `libcudnn.so` (newer frontends;
   older ones start at step 2);
2. `<purelib>/nvidia/cudnn/lib/libcudnn.so.*[0-9]` (the nvidia-cudnn-cu12/-cu13 wheel); more than
   one match and the frontend refuses to import;
3. `<purelib>/nvidia/cudnn_jit/lib/libcudnn.so.*[0-9]`;
4. `libcudnn.so.9`, then `libcudnn.so`, by name. FlashInfer and the engines import torch first,
   and a CUDA torch has by then loaded its own libcudnn.so.9, which a by-name load returns.

A library that an installed nvidia-cudnn wheel put there, unchanged, is not loaded at all: the
wheel's RECORD lists the file and its size, and the wheel's version is the version the library
reports (9.28.0.42 -> 92800; `tests/test_probe_cudnn.py` checks both readings agree). That
skips the reader below (50-400 ms, most of the probe on a host with the wheel). Any other file,
or a wheel file whose size differs from its RECORD (replaced, truncated), is read as follows.

The call runs in a short-lived child interpreter, for two reasons. cuDNN 9's `libcudnn.so.9` is
a small shim, but `cudnnGetVersion` makes it load `libcudnn_graph.so.9`, whose static
constructors page in about 50 MiB; kept out of the doctor's process, that cost is paid once
and released. And a corrupt library that crashes the loader becomes an error value here,
never a crash of the doctor.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fp4doctor.facts import CudnnFacts, CudnnLibrary, PackageFacts
from fp4doctor.probe.packages import torch_dir
from fp4doctor.signals import signal_name

BY_NAME = ("libcudnn.so.9", "libcudnn.so")
_WHEEL_GLOB = "libcudnn.so.*[0-9]"
_CUDNN_WHEELS = ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13")
READ_TIMEOUT_S = 20.0

# Runs in `python -I -S`: loads the first target that loads (RTLD_LOCAL, so nothing leaks into
# symbol resolution), calls cudnnGetVersion, and names the file it really mapped.
_READER = r"""
import ctypes, os, sys
lib, failures = None, []
for target in sys.argv[1:]:
    try:
        lib = ctypes.CDLL(target, mode=os.RTLD_LOCAL)
        break
    except OSError as exc:
        failures.append(str(exc))
if lib is None:
    print("error", "; ".join(failures).replace("\n", " "))
    raise SystemExit(0)
try:
    get_version = lib.cudnnGetVersion
except AttributeError:
    print("error", target + ": loads, but has no cudnnGetVersion symbol")
    raise SystemExit(0)
get_version.restype = ctypes.c_size_t
get_version.argtypes = []
version = get_version()
address = ctypes.cast(get_version, ctypes.c_void_p).value
path = target
with open("/proc/self/maps") as maps:
    for line in maps:
        fields = line.split(None, 5)
        low, high = (int(x, 16) for x in fields[0].split("-"))
        if low <= address < high and len(fields) == 6:
            path = fields[5].strip()
            break
print("ok", version, path)
"""


@dataclass(frozen=True)
class Candidate:
    """Where a loader would get libcudnn: a file, or names for the dynamic linker to resolve."""

    targets: tuple[str, ...]
    origin: str
    path: str | None = None  # set when the loader opens a known file
    error: str | None = None  # set when the loader would fail before loading anything


def probe_cudnn(
    environ: Mapping[str, str] | None = None,
    packages: PackageFacts | None = None,
    *,
    purelib: str | None = None,
    search_path: Sequence[str] | None = None,
    timeout: float = READ_TIMEOUT_S,
) -> CudnnFacts:
    """The frontend's cuDNN and, when it is another file, torch's.

    `purelib` is the frontend's site-packages (default: this interpreter's), `search_path` the
    directories torch searches (default `sys.path`); both are parameters so tests can point them
    at a temporary tree.
    """
    env = os.environ if environ is None else environ
    site = sysconfig.get_path("purelib") if purelib is None else purelib
    dirs = list(sys.path if search_path is None else search_path)
    installed = packages.versions if packages is not None else {}

    torch_candidate: Candidate | None = None
    if packages is not None and "torch" in installed and packages.torch_cuda is not None:
        torch_candidate = torch_cudnn(packages.torch_cuda, dirs, installed)

    frontend_candidate = frontend_cudnn(env, site, installed, torch_candidate)
    frontend = read_library(frontend_candidate, env, timeout, [site, *dirs])

    torch_library: CudnnLibrary | None = None
    if (
        torch_candidate is not None
        and torch_candidate.path is not None
        and not _same_file(torch_candidate.path, frontend.path)
    ):
        torch_library = read_library(torch_candidate, env, timeout, [site, *dirs])
    return CudnnFacts(frontend=frontend, torch=torch_library)


def frontend_cudnn(
    environ: Mapping[str, str],
    purelib: str,
    installed: Mapping[str, str],
    torch_candidate: Candidate | None = None,
) -> Candidate:
    """The library cudnn-frontend's `_dlopen_cudnn` would load, in its order (module docstring)."""
    for directory in environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if not directory:
            continue
        for name in BY_NAME:
            path = os.path.join(directory, name)
            if os.path.exists(path):
                return Candidate((path,), "LD_LIBRARY_PATH", path)
    for folder in ("cudnn", "cudnn_jit"):
        found = sorted(glob.glob(os.path.join(purelib, "nvidia", folder, "lib", _WHEEL_GLOB)))
        if len(found) > 1:
            return Candidate(
                tuple(found),
                _wheel_origin(found[0], installed),
                error=(
                    f"Found {len(found)} libcudnn.so.x in nvidia-cudnn-cuXX: {', '.join(found)}; "
                    "cudnn-frontend refuses to import (remove the stale copy)"
                ),
            )
        if found:
            return Candidate((found[0],), _wheel_origin(found[0], installed), found[0])
    if torch_candidate is not None and torch_candidate.path is not None:
        return Candidate(
            (torch_candidate.path,),
            f"{torch_candidate.origin}, loaded by torch before cudnn-frontend asks by name",
            torch_candidate.path,
        )
    return Candidate(BY_NAME, "system")


def torch_cudnn(
    torch_cuda: str, search_path: Sequence[str], installed: Mapping[str, str]
) -> Candidate | None:
    """The libcudnn a CUDA build of torch loads, or None when none is found.

    A libcudnn bundled in torch/lib wins (conda and source builds); a pip torch preloads the
    first `nvidia/cudnn/lib`, `nvidia/cu<major>/lib` or `cudnn/lib` match along `sys.path`
    (torch/__init__.py `_get_cuda_dep_paths`).
    """
    package = torch_dir(search_path)
    if package is not None:
        bundled = sorted(
            p
            for p in glob.glob(os.path.join(package, "lib", "libcudnn.so*"))
            if os.path.basename(p).startswith("libcudnn.so")
        )
        if bundled:
            return Candidate((bundled[0],), "torch/lib (bundled with torch)", bundled[0])
    major = torch_cuda.split(".")[0]
    for entry in search_path:
        for folder in (
            os.path.join(entry, "nvidia", "cudnn", "lib"),
            os.path.join(entry, "nvidia", f"cu{major}", "lib"),
            os.path.join(entry, "cudnn", "lib"),
        ):
            found = sorted(glob.glob(os.path.join(folder, _WHEEL_GLOB)))
            if found:
                return Candidate((found[0],), _wheel_origin(found[0], installed), found[0])
    return None


def read_library(
    candidate: Candidate,
    environ: Mapping[str, str],
    timeout: float = READ_TIMEOUT_S,
    site_dirs: Sequence[str] = (),
) -> CudnnLibrary:
    """The version of the candidate: its wheel's, when an nvidia-cudnn wheel in one of
    `site_dirs` installed that file unchanged (`recorded_version`); otherwise load it in a
    child interpreter and ask it `cudnnGetVersion`."""
    if candidate.error is not None:
        return CudnnLibrary(path=candidate.path, origin=candidate.origin, error=candidate.error)
    if candidate.path is not None:
        recorded = recorded_version(candidate.path, site_dirs)
        if recorded is not None:
            return CudnnLibrary(path=candidate.path, version=recorded, origin=candidate.origin)
    child_env = dict(os.environ)
    if "LD_LIBRARY_PATH" in environ:
        child_env["LD_LIBRARY_PATH"] = environ["LD_LIBRARY_PATH"]
    else:
        child_env.pop("LD_LIBRARY_PATH", None)
    shown = candidate.path or " or ".join(candidate.targets)

    def failed(reason: str) -> CudnnLibrary:
        return CudnnLibrary(path=candidate.path, origin=candidate.origin, error=reason)

    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _READER, *candidate.targets],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=child_env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return failed(f"loading {shown} did not finish within {timeout:g} s")
    except OSError as exc:
        return failed(f"cannot start a reader for {shown}: {exc}")
    if done.returncode < 0:
        return failed(f"loading {shown} crashed the reader with {signal_name(-done.returncode)}")
    line = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    status, _, rest = line.partition(" ")
    if status == "ok":
        number, _, path = rest.partition(" ")
        if number.isdigit():
            return CudnnLibrary(
                path=path or candidate.path, version=int(number), origin=candidate.origin
            )
    if status == "error":
        if candidate.path is None:
            return failed(
                f"no libcudnn found: not in LD_LIBRARY_PATH, nor the nvidia-cudnn wheel "
                f"directory, nor by name ({rest})"
            )
        return failed(rest)
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return failed(f"reading {shown} failed (exit {done.returncode}): {tail}")


_CUDNN_DIST_INFO = re.compile(r"nvidia_cudnn_cu1\d-(\d+)\.(\d+)\.(\d+)[^-]*\.dist-info$")
# The shim forwards cudnnGetVersion to the graph library beside it: both must be the wheel's.
_VERSION_FILES = ("libcudnn_graph.so.9",)


def recorded_version(path: str, site_dirs: Sequence[str]) -> int | None:
    """cuDNN's integer version of `path` when an installed nvidia-cudnn-cu12/-cu13 wheel put it
    there unchanged: the wheel's RECORD lists the file (and the graph library that answers
    `cudnnGetVersion` for it) with the size it has now. None when no single wheel does."""
    real = os.path.realpath(path)
    answers: set[int] = set()
    for site_dir in dict.fromkeys(os.path.realpath(d) for d in site_dirs if d):
        relative = os.path.relpath(real, site_dir)
        if relative.startswith(".."):
            continue
        try:
            names = os.listdir(site_dir)
        except OSError:
            continue
        for name in names:
            matched = _CUDNN_DIST_INFO.match(name)
            if matched is None:
                continue
            sizes = _record_sizes(os.path.join(site_dir, name, "RECORD"))
            folder = os.path.dirname(relative)
            wanted = [relative, *(os.path.join(folder, f) for f in _VERSION_FILES)]
            if all(_same_size(sizes.get(w), os.path.join(site_dir, w)) for w in wanted):
                major, minor, patch = (int(x) for x in matched.groups())
                answers.add(major * (10000 if major >= 9 else 1000) + minor * 100 + patch)
    return answers.pop() if len(answers) == 1 else None


def _record_sizes(record: str) -> dict[str, int]:
    """A wheel RECORD's `path,hash,size` lines as path -> size (lines without a size left out)."""
    sizes: dict[str, int] = {}
    try:
        with open(record, encoding="utf-8") as handle:
            for line in handle:
                file, _, rest = line.rstrip("\n").partition(",")
                size = rest.rpartition(",")[2]
                if size.isdigit():
                    sizes[os.path.normpath(file)] = int(size)
    except (OSError, UnicodeDecodeError):
        return {}
    return sizes


def _same_size(recorded: int | None, path: str) -> bool:
    try:
        return recorded is not None and os.stat(path).st_size == recorded
    except OSError:
        return False


def _wheel_origin(path: str, installed: Mapping[str, str]) -> str:
    wheels = [name for name in _CUDNN_WHEELS if name in installed]
    if "/nvidia/cudnn_jit/" in path:
        return "nvidia/cudnn_jit wheel directory"
    if len(wheels) == 1:
        return f"{wheels[0]} wheel"
    if wheels:
        return (
            "nvidia-cudnn-cu12 and nvidia-cudnn-cu13 wheels (both installed, sharing one directory)"
        )
    return "a wheel directory, with no nvidia-cudnn-cu12/-cu13 distribution recorded"


def _same_file(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
