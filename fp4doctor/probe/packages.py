"""Installed versions of the packages that decide the FP4 paths, read from their metadata.

Nothing is imported: versions come from `importlib.metadata` (one lookup per name, no scan of
every installed distribution), and torch's CUDA build from the text of `torch/version.py`.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
from collections.abc import Iterable, Sequence

from fp4doctor.facts import PackageFacts, canonical_name

# The distributions every probe looks up (the engines, to pick a target, and the libraries
# a snapshot should carry); a profile's own packages are added to these. `tensorrt_llm` is an
# older spelling of `tensorrt-llm`; both normalise to one key.
PACKAGES: tuple[str, ...] = (
    "torch",
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    "nvidia-cudnn-frontend",
    "nvidia-cutlass-dsl",
    "vllm",
    "sglang",
    "sgl-kernel",
    "tensorrt-llm",
    "tensorrt_llm",
    "fbgemm-gpu",
    "fbgemm-gpu-genai",
    "b12x",
    "humming",
)

_ASSIGNMENT = re.compile(
    r"^(?P<name>__version__|cuda|git_version|hip)\s*(?::[^=]*)?=\s*(?P<value>.+?)\s*(?:#.*)?$", re.M
)


def probe_packages(
    path: Sequence[str] | None = None, names: Iterable[str] = PACKAGES
) -> PackageFacts:
    """Versions of `names` that are installed, and torch's CUDA/HIP build facts.

    `path` is the list of directories to search (default `sys.path`); a distribution whose
    metadata cannot be read is reported in `errors`, never raised.
    """
    search = None if path is None else list(path)
    versions: dict[str, str] = {}
    errors: dict[str, str] = {}
    for name in names:
        key = canonical_name(name)
        if key in versions or key in errors:
            continue
        try:
            found = (
                importlib.metadata.distributions(name=name)
                if search is None
                else importlib.metadata.distributions(name=name, path=search)
            )
            dist = next(iter(found), None)
        except Exception as exc:  # a broken path entry; keep the other packages
            errors[key] = f"cannot search for {name}: {type(exc).__name__}: {exc}"
            continue
        if dist is None:
            continue
        where = getattr(dist, "_path", None)  # the .dist-info directory, for the message
        try:
            version = dist.version
        except Exception as exc:
            errors[key] = f"{where}: cannot read the metadata: {type(exc).__name__}: {exc}"
            continue
        if not isinstance(version, str) or not version:
            errors[key] = f"{where}: the metadata has no Version"
            continue
        versions[key] = version

    torch_cuda = torch_git = torch_hip = None
    if "torch" in versions:
        try:
            fields = torch_build(search)
            torch_cuda, torch_git, torch_hip = (
                fields.get("cuda"),
                fields.get("git_version"),
                fields.get("hip"),
            )
            # torch.__version__ as torch reports it ("2.11.0+cu130"); some wheels' metadata
            # drop the local part ("2.11.0").
            if fields.get("__version__"):
                versions["torch"] = str(fields["__version__"])
        except Exception as exc:
            errors["torch/version.py"] = f"{type(exc).__name__}: {exc}"
    return PackageFacts(
        versions=versions,
        torch_cuda=torch_cuda,
        torch_git_version=torch_git,
        torch_hip=torch_hip,
        errors=errors,
    )


def torch_dir(path: Sequence[str] | None = None) -> str | None:
    """The directory of the `torch` package that `import torch` would use, without importing it."""
    if path is None:
        spec = importlib.util.find_spec("torch")
    else:
        spec = importlib.machinery.PathFinder.find_spec("torch", list(path))
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def torch_build(path: Sequence[str] | None = None) -> dict[str, str | None]:
    """`cuda`, `git_version` and `hip` as torch/version.py writes them (None where it says None)."""
    directory = torch_dir(path)
    if directory is None:
        raise FileNotFoundError("torch is installed but its package directory is not on the path")
    version_py = os.path.join(directory, "version.py")
    with open(version_py, encoding="utf-8") as handle:
        text = handle.read()
    return parse_torch_version_py(text)


def parse_torch_version_py(text: str) -> dict[str, str | None]:
    """Read the simple assignments of torch/version.py; values are string literals or None."""
    found: dict[str, str | None] = {}
    for match in _ASSIGNMENT.finditer(text):
        value = match.group("value")
        if value == "None":
            found[match.group("name")] = None
        elif len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            found[match.group("name")] = value[1:-1]
    return found
