"""Whether the engine installed here is the engine of a facts snapshot (another host's), and
what of this install to hide from it so that it answers as that host's would.

The installed engine's answer stands for another host's only when what its selection reads is
the same there: the distributions the rules read (the engine, FlashInfer and its cubin and JIT
packages, CUTLASS-DSL, cuDNN, torch ...), the toolchain its FlashInfer checks look for (nvcc, on
PATH or under CUDA_HOME, and ninja) and the FP4 variables. The parent (`expected`, no torch)
writes down what the facts hold; the worker (`compare`, `apply`), under the engine's
interpreter and before the engine is imported, compares it with what it finds:
- a distribution or tool the facts have at another version, or that this install lacks: not
  asked ("the installed engine is not the facts' engine (differs: ...)");
- one this install has and the facts lack: hidden from the engine (its modules and metadata not
  found, as when it is not installed; nvcc and ninja off PATH and CUDA_HOME pointed at no
  toolkit), as tools/engine_agreement.py asks an install without FlashInfer;
- the FP4 variables: the facts', in place of this environment's.

Torch-free and engine-free (the worker imports it before the engine).
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import os
import shutil
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fp4doctor.facts import HostFacts, ToolchainFacts

# The variables an engine's selection reads by prefix: the facts' replace this environment's.
ENGINE_PREFIXES = ("VLLM_", "SGLANG_", "FLASHINFER_")
# Set by fp4doctor itself for every worker (smoke/runner.py worker_env): never the facts'.
OWN = ("FLASHINFER_DISABLE_JIT", "FLASHINFER_NO_DOWNLOAD")
NO_TOOLKIT = "/nonexistent/fp4doctor-hidden-cuda"  # CUDA_HOME with no bin/nvcc under it


@dataclass(frozen=True)
class Expected:
    """What a facts snapshot holds, of what the engine's selection reads."""

    packages: dict[str, str | None]  # distribution -> version there (None: not installed)
    nvcc: str | None = None  # the nvcc version FlashInfer's JIT would use there
    nvcc_on_path: bool | None = None  # nvcc found on PATH there (None: not recorded)
    ninja: bool = False
    env: dict[str, str] = field(default_factory=dict)  # the FP4 variables there

    def to_dict(self) -> dict[str, Any]:
        return {
            "packages": dict(self.packages),
            "nvcc": self.nvcc,
            "nvcc_on_path": self.nvcc_on_path,
            "ninja": self.ninja,
            "env": dict(self.env),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Expected:
        on_path = data.get("nvcc_on_path")
        return cls(
            packages={
                str(k): (None if v is None else str(v))
                for k, v in dict(data.get("packages") or {}).items()
            },
            nvcc=None if data.get("nvcc") is None else str(data["nvcc"]),
            nvcc_on_path=None if on_path is None else bool(on_path),
            ninja=bool(data.get("ninja")),
            env={str(k): str(v) for k, v in dict(data.get("env") or {}).items()},
        )


def expected(facts: HostFacts, packages: Iterable[str]) -> Expected:
    """What `facts` hold of `packages` (the distributions the rules read), the toolchain and
    the FP4 variables (a redacted value is left out: it cannot be replayed)."""
    from fp4doctor.facts import REDACTED, canonical_name

    tc = facts.toolchain
    return Expected(
        packages={canonical_name(p): facts.packages.version(p) for p in sorted(packages)},
        nvcc=tc.nvcc_version if tc.nvcc_path else None,
        nvcc_on_path=_on_path(tc),
        ninja=tc.ninja_path is not None and "ninja" not in tc.errors,
        env={k: v for k, v in facts.env.items() if k.startswith(ENGINE_PREFIXES) and v != REDACTED},
    )


def _on_path(tc: ToolchainFacts) -> bool:
    """Whether nvcc is on PATH there (vLLM before 0.32 looks only there): the probe's record,
    else (a snapshot from before it) whether its CUDA home came from PATH."""
    return bool(tc.nvcc_on_path) or (tc.cuda_home_source == "PATH" and tc.nvcc_path is not None)


@dataclass(frozen=True)
class Hiding:
    """What of this install the engine must not see: distributions, and tools off PATH."""

    distributions: tuple[str, ...] = ()
    nvcc: bool = False  # off PATH, and CUDA_HOME/CUDA_PATH at no toolkit
    nvcc_off_path: bool = False  # off PATH only (the facts' nvcc is under CUDA_HOME)
    ninja: bool = False
    env: dict[str, str | None] = field(default_factory=dict)  # set (str) or unset (None)


def compare(want: Expected, environ: Mapping[str, str]) -> tuple[list[str], Hiding]:
    """(what differs, what to hide) between the facts and this install (this interpreter's
    distributions, `environ`'s toolchain)."""
    from fp4doctor.probe.toolchain import probe_toolchain

    differs: list[str] = []
    hidden: list[str] = []
    for name, theirs in sorted(want.packages.items()):
        ours = _version(name)
        if theirs is None and ours is not None:
            hidden.append(name)
        elif theirs is not None and ours is None:
            differs.append(f"{name} {theirs} there, not installed here")
        elif theirs != ours:
            differs.append(f"{name} {theirs} there, {ours} here")
    tc = probe_toolchain(environ)
    ours_nvcc = tc.nvcc_version if tc.nvcc_path else None
    hide_nvcc = off_path = False
    here_on_path = shutil.which("nvcc", path=environ.get("PATH", os.defpath)) is not None
    if want.nvcc is None:
        hide_nvcc = ours_nvcc is not None or here_on_path
    elif ours_nvcc is None:
        differs.append(f"nvcc {want.nvcc} there, none here")
    elif ours_nvcc != want.nvcc:
        differs.append(f"nvcc {want.nvcc} there, {ours_nvcc} here")
    elif want.nvcc_on_path is False and here_on_path:
        off_path = True
    elif want.nvcc_on_path is True and not here_on_path:
        differs.append("nvcc on PATH there, only under the CUDA home here")
    ours_ninja = tc.ninja_path is not None and "ninja" not in tc.errors
    if want.ninja and not ours_ninja:
        differs.append("ninja on PATH there, not here")
    env: dict[str, str | None] = {
        k: None for k in environ if k.startswith(ENGINE_PREFIXES) and k not in OWN
    }
    env.update({k: v for k, v in want.env.items() if k not in OWN})
    hiding = Hiding(tuple(hidden), hide_nvcc, off_path, ours_ninja and not want.ninja, env)
    return differs, hiding


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def apply(hiding: Hiding, environ: MutableMapping[str, str]) -> None:
    """Hide from this process what `hiding` names: its distributions' modules and metadata
    (not found, as when not installed), its tools (PATH without their directories; CUDA_HOME
    at no toolkit for nvcc), and the FP4 variables replaced."""
    for name, value in hiding.env.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    if hiding.nvcc_off_path and not environ.get("CUDA_HOME"):  # its home, found before
        from fp4doctor.probe.toolchain import cuda_home

        home, _source = cuda_home(environ)
        if home:
            environ["CUDA_HOME"] = home
    tools = [t for t, off in (("nvcc", hiding.nvcc or hiding.nvcc_off_path),
                              ("ninja", hiding.ninja)) if off]  # fmt: skip
    if tools:
        environ["PATH"] = _path_without(environ.get("PATH", os.defpath), tools)
    if hiding.nvcc:
        environ["CUDA_HOME"] = environ["CUDA_PATH"] = NO_TOOLKIT
    if hiding.distributions:
        hide_distributions(hiding.distributions)


def _path_without(path: str, tools: Iterable[str]) -> str:
    """`path` less every directory that holds one of `tools`."""
    kept = []
    for entry in path.split(os.pathsep):
        if not any(os.path.isfile(os.path.join(entry or ".", t)) for t in tools):
            kept.append(entry)
    return os.pathsep.join(kept)


def hide_distributions(names: Iterable[str]) -> None:
    """Make the path finder and the metadata finder find nothing of these distributions: their
    top-level modules' find_spec gives None (`import` raises ModuleNotFoundError) and
    importlib.metadata knows no such distribution, as when they are not installed."""
    from fp4doctor.facts import canonical_name

    dists = {canonical_name(n) for n in names}
    modules: set[str] = set()
    for name in dists:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        parts = [f.parts for f in files if f.parts]
        packages = {p[0] for p in parts if len(p) == 2 and p[1] == "__init__.py"}
        for p in parts:
            top = p[0]
            if top.endswith((".dist-info", ".data", ".pth")) or top in ("..", "__pycache__"):
                continue
            if len(p) == 1:
                modules.add(top.removesuffix(".py").split(".")[0])
            elif top in packages:
                modules.add(top)
            elif p[1] != "__pycache__":  # a namespace package (nvidia/): its own part of it
                modules.add(f"{top}.{p[1].removesuffix('.py')}")

    def hidden(module: str) -> bool:
        return any(module == m or module.startswith(f"{m}.") for m in modules)

    path_finder: Any = importlib.machinery.PathFinder
    meta_finder: Any = importlib.metadata.MetadataPathFinder
    find_spec = path_finder.find_spec.__func__
    find_dists = meta_finder.find_distributions.__func__

    def spec(cls: Any, name: str, path: Any = None, target: Any = None) -> Any:
        return None if hidden(name) else find_spec(cls, name, path, target)

    def distributions(cls: Any, context: Any = None) -> Any:
        context = context or importlib.metadata.DistributionFinder.Context()
        for dist in find_dists(cls, context):
            if canonical_name(dist.metadata["Name"] or "") not in dists:
                yield dist

    path_finder.find_spec = classmethod(spec)
    meta_finder.find_distributions = classmethod(distributions)
