"""The toolchain FlashInfer's JIT would build with: CUDA home, nvcc and its version, ninja.

The CUDA home is resolved in FlashInfer's order (`flashinfer/jit/cpp_ext.py::get_cuda_path`):
`CUDA_HOME`, then `CUDA_PATH`, then the parent of the directory holding `nvcc` on `PATH`, then
`/usr/local/cuda`. FlashInfer then runs `<home>/bin/nvcc` and does not look further, so neither
does this probe. The version comes from the toolkit's `version.json` (or the older
`version.txt`) when present, else from `nvcc --version`, the only subprocess here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sysconfig
from collections.abc import Mapping

from fp4doctor.facts import ToolchainFacts
from fp4doctor.textfile import read_bytes

_MAX_VERSION_FILE = 1 << 20  # the toolkit's version.json is a few KiB (a FIFO there: not read)

DEFAULT_CUDA_HOME = "/usr/local/cuda"
NVCC_TIMEOUT_S = 15.0
_RELEASE = re.compile(r"release (\d+\.\d+)")
_VERSION_TXT = re.compile(r"CUDA Version (\d+\.\d+)")


def probe_toolchain(
    environ: Mapping[str, str] | None = None,
    *,
    default_cuda_home: str = DEFAULT_CUDA_HOME,
    timeout: float = NVCC_TIMEOUT_S,
) -> ToolchainFacts:
    """nvcc and ninja as FlashInfer's JIT would find them under `environ`."""
    env = os.environ if environ is None else environ
    errors: dict[str, str] = {}
    search_path = env.get("PATH", os.defpath)

    home, source = cuda_home(env, default_cuda_home)
    nvcc_path = nvcc_version = None
    if home is None:
        errors["nvcc"] = (
            "no CUDA toolkit: CUDA_HOME and CUDA_PATH are unset, nvcc is not on PATH, "
            f"and {default_cuda_home} does not exist"
        )
    else:
        candidate = os.path.join(home, "bin", "nvcc")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            nvcc_path = candidate
            nvcc_version, problem = toolkit_version(home, candidate, timeout)
            if problem:
                errors["nvcc_version"] = problem
        else:
            errors["nvcc"] = f"{candidate} does not exist ({source} gives CUDA home {home})"

    ninja_path = shutil.which("ninja", path=search_path)
    if ninja_path is None:
        packaged = _packaged_ninja()
        if packaged is not None:
            ninja_path = packaged
            errors["ninja"] = (
                f"{packaged} (from the ninja package) is not on PATH; "
                "FlashInfer runs `ninja` from PATH"
            )
        else:
            errors["ninja"] = "ninja is not on PATH (pip install ninja)"

    return ToolchainFacts(
        cuda_home=home,
        cuda_home_source=source,
        nvcc_path=nvcc_path,
        nvcc_version=nvcc_version,
        ninja_path=ninja_path,
        nvcc_on_path=shutil.which("nvcc", path=search_path),
        errors=errors,
    )


def cuda_home(
    environ: Mapping[str, str], default: str = DEFAULT_CUDA_HOME
) -> tuple[str | None, str | None]:
    """FlashInfer's CUDA home and which rule gave it (`CUDA_HOME`, `CUDA_PATH`, `PATH`, default)."""
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        value = environ.get(variable)
        if value:  # FlashInfer uses `or`, so an empty value falls through
            return value, variable
    nvcc = shutil.which("nvcc", path=environ.get("PATH", os.defpath))
    if nvcc is not None:
        return os.path.dirname(os.path.dirname(nvcc)), "PATH"
    if os.path.exists(default):
        return default, default
    return None, None


def toolkit_version(
    home: str, nvcc: str, timeout: float = NVCC_TIMEOUT_S
) -> tuple[str | None, str | None]:
    """The toolkit's "X.Y": from version.json / version.txt under `home`, else `nvcc --version`.

    Returns (version, problem); problem says why no version could be read.
    """
    try:
        raw = read_bytes(os.path.join(home, "version.json"), limit=_MAX_VERSION_FILE)
        text = str(json.loads(raw)["cuda"]["version"])
        major_minor = re.match(r"\d+\.\d+", text)
        if major_minor:
            return major_minor.group(0), None
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        raw = read_bytes(os.path.join(home, "version.txt"), limit=_MAX_VERSION_FILE)
        match = _VERSION_TXT.search(raw.decode("utf-8", "replace"))
        if match:
            return match.group(1), None
    except (OSError, ValueError):
        pass
    try:
        done = subprocess.run(
            [nvcc, "--version"], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return None, f"`{nvcc} --version` did not finish within {timeout:g} s"
    except OSError as exc:
        return None, f"cannot run {nvcc}: {exc.strerror or exc}"
    match = _RELEASE.search(done.stdout)
    if done.returncode != 0 or match is None:
        said = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        return None, f"`{nvcc} --version` exited {done.returncode} without a release: {said}"
    return match.group(1), None


def _packaged_ninja() -> str | None:
    """The ninja binary the `ninja` Python package installed, if it did."""
    candidates = [os.path.join(sysconfig.get_path("scripts"), "ninja")]
    spec = importlib.util.find_spec("ninja")
    if spec is not None and spec.submodule_search_locations:
        package = next(iter(spec.submodule_search_locations))
        candidates.append(os.path.join(package, "data", "bin", "ninja"))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None
