"""One check per requirement kind: does this host (or this GPU) meet it, and what was measured.

Every version comparison goes through `packaging`. A check never raises for odd facts: an
unparseable version is a failed check that says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from fp4doctor.facts import Gpu, HostFacts, canonical_name
from fp4doctor.profile.model import Requirement


@dataclass(frozen=True)
class Context:
    """What the rules look at: the facts, the package versions (engine version applied), env."""

    facts: HostFacts
    versions: Mapping[str, str]  # canonical distribution name -> installed version
    env: Mapping[str, str]
    # The engine version being judged (it may not be installed): `when` conditions use it.
    engine: tuple[str, str] | None = None

    @property
    def gpus(self) -> list[Gpu]:
        return self.facts.gpus

    def version(self, dist: str) -> str | None:
        return self.versions.get(canonical_name(dist))


@dataclass(frozen=True)
class Check:
    ok: bool
    measured: str
    required: str


def contains(spec: SpecifierSet, version: str) -> bool | None:
    """`version in spec`, judged by the release a build belongs to: 0.5.10rc0, 0.11.1.dev12
    and 2.9.1+cu128 count as 0.5.10, 0.11.1 and 2.9.1 (PEP 440 would put a release candidate
    of 0.5.10 below `>=0.5.10` and outside `<0.5.10` too). None when it cannot be parsed."""
    try:
        return spec.contains(Version(Version(version).base_version), prereleases=True)
    except InvalidVersion:
        return None


def spec_text(spec: SpecifierSet) -> str:
    """A specifier as people write it: lower bounds first (`>=10.0, <13.0`)."""
    parts = sorted(spec, key=lambda s: (not s.operator.startswith(">"), s.version))
    return ", ".join(str(p) for p in parts) or "any version"


def applies(req: Requirement, ctx: Context) -> bool:
    """Whether a requirement's `when` conditions hold for the installed versions.

    A version that cannot be read counts as absent: the `when_absent` variant (what a fresh
    install gets) applies, never none of them (which would drop the rule silently)."""
    for dist, spec in req.when:
        installed = ctx.version(dist)
        if ctx.engine is not None and canonical_name(dist) == ctx.engine[0]:
            installed = ctx.engine[1]
        matched = None if installed is None else contains(spec, installed)
        if matched is None:
            if not req.when_absent:
                return False
            continue
        if not matched:
            return False
    return True


def check(req: Requirement, ctx: Context, gpu: Gpu | None) -> Check:
    """Evaluate one requirement; `gpu` is the GPU for per-GPU kinds (None when there is none)."""
    return _CHECKS[req.kind](req, ctx, gpu)


# --- kinds -----------------------------------------------------------------------------------


def _package(req: Requirement, ctx: Context, gpu: Gpu | None) -> Check:
    name = str(req.arg)
    installed = ctx.version(name)
    if req.negate:
        return Check(
            installed is None,
            f"{name} {installed} is installed" if installed else f"{name} is not installed",
            f"{name} not installed",
        )
    wanted = f"{name} {spec_text(req.version)}" if req.version else f"{name} installed"
    if installed is None:
        return Check(False, f"{name} is not installed", wanted)
    if req.version is None:
        return Check(True, f"{name} {installed}", wanted)
    ok = contains(req.version, installed)
    if ok is None:
        return Check(False, f"{name} {installed} (not a version fp4doctor can compare)", wanted)
    return Check(ok, f"{name} {installed}", wanted)


def _compute_capability(req: Requirement, ctx: Context, gpu: Gpu | None) -> Check:
    arg = req.arg
    if isinstance(arg, tuple):
        ccs = [f"{c // 10}.{c % 10}" for c in arg]
        wanted = (
            f"compute capability {ccs[0]}"
            if len(ccs) == 1
            else (f"compute capability {', '.join(ccs[:-1])} or {ccs[-1]}")
        )
    else:
        assert isinstance(arg, SpecifierSet)
        wanted = f"compute capability {spec_text(arg)}"
    if gpu is None:
        return Check(False, "no NVIDIA GPU is visible", wanted)
    measured = f"GPU {gpu.index} ({gpu.name}) has compute capability {gpu.cc_text}"
    ok = gpu.cc in arg if isinstance(arg, tuple) else contains(arg, gpu.cc_text)
    return Check(bool(ok), measured, wanted)


def _versioned(
    label: str, value: Callable[[Context], str | None], missing: Callable[[Context], str]
) -> Callable[[Requirement, Context, Gpu | None], Check]:
    def run(req: Requirement, ctx: Context, gpu: Gpu | None) -> Check:
        spec = req.arg
        assert isinstance(spec, SpecifierSet)
        wanted = f"{label} {spec_text(spec)}" if str(spec) else f"{label} present"
        found = value(ctx)
        if found is None:
            return Check(False, missing(ctx), wanted)
        ok = contains(spec, found)
        if ok is None:
            return Check(False, f"{label} {found} (not a version fp4doctor can compare)", wanted)
        return Check(ok, f"{label} {found}", wanted)

    return run


def _cudnn_missing(ctx: Context) -> str:
    lib = ctx.facts.cudnn.frontend
    if lib.error:
        return f"no usable libcudnn: {lib.error}"
    return "no libcudnn found where cudnn-frontend looks (nvidia/cudnn/lib, then libcudnn.so.9)"


def _cuda_runtime_missing(ctx: Context) -> str:
    if ctx.version("torch") is None:
        return "CUDA runtime unknown: torch is not installed"
    return f"torch {ctx.version('torch')} has no CUDA runtime (a CPU build)"


def _nvcc_missing(ctx: Context) -> str:
    tc = ctx.facts.toolchain
    if tc.nvcc_path:
        return f"nvcc at {tc.nvcc_path} did not report a version"
    return "no nvcc found (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)"


def _ninja(req: Requirement, ctx: Context, gpu: Gpu | None) -> Check:
    path = ctx.facts.toolchain.ninja_path
    return Check(path is not None, f"ninja at {path}" if path else "no ninja on PATH", "ninja")


def _pair(req: Requirement) -> tuple[str, str]:
    names = req.arg
    assert isinstance(names, tuple) and len(names) == 2
    return str(names[0]), str(names[1])


def _same_version(req: Requirement, ctx: Context, gpu: Gpu | None) -> Check:
    a, b = _pair(req)
    va, vb = ctx.version(a), ctx.version(b)
    wanted = f"{a} at the same version as {b}"
    if va is None:
        return Check(False, f"{a} is not installed" + (f" ({b} {vb})" if vb else ""), wanted)
    if vb is None:
        return Check(False, f"{b} is not installed", wanted)
    try:
        same = Version(va) == Version(vb)
    except InvalidVersion:
        same = va == vb
    return Check(same, f"{a} {va}, {b} {vb}", wanted)


TRUE_WORDS = ("1", "true", "yes", "on")


def _env(req: Requirement, ctx: Context, gpu: Gpu | None) -> Check:
    name = str(req.arg)
    value = ctx.env.get(name)
    if req.equals is not None:
        wanted = f"{name}={req.equals}"
        ok = value == req.equals
    else:
        wanted = f"{name} set to a true value"
        ok = value is not None and value.strip().lower() in TRUE_WORDS
    measured = f"{name}={value}" if value is not None else f"{name} is not set"
    return Check(ok, measured, wanted)


def _all_of(req: Requirement, ctx: Context, gpu: Gpu | None) -> Check:
    results = [check(c, ctx, gpu) for c in req.children if applies(c, ctx)]
    failed = [r for r in results if not r.ok]
    required = " and ".join(r.required for r in results) or "nothing"
    if failed:
        return Check(False, "; ".join(r.measured for r in failed), required)
    return Check(True, "; ".join(r.measured for r in results), required)


def _any_of(req: Requirement, ctx: Context, gpu: Gpu | None) -> Check:
    results = [check(c, ctx, gpu) for c in req.children if applies(c, ctx)]
    if not results:
        return Check(True, "no alternative applies", "nothing")
    required = " or ".join(
        f"({r.required})" if " and " in r.required else r.required for r in results
    )
    passed = [r for r in results if r.ok]
    if passed:
        return Check(True, passed[0].measured, required)
    return Check(False, "; ".join(r.measured for r in results), required)


_CHECKS: dict[str, Callable[[Requirement, Context, Gpu | None], Check]] = {
    "package": _package,
    "compute_capability": _compute_capability,
    "cudnn_backend": _versioned(
        "cuDNN backend", lambda c: c.facts.cudnn.frontend.version_text, _cudnn_missing
    ),
    "cuda_runtime": _versioned(
        "CUDA runtime", lambda c: c.facts.packages.torch_cuda, _cuda_runtime_missing
    ),
    "cuda_driver": _versioned(
        "CUDA driver",
        lambda c: c.facts.nvml.cuda_driver_version,
        lambda c: f"CUDA driver version unknown (NVML: {c.facts.nvml.status})",
    ),
    "nvcc": _versioned("nvcc", lambda c: c.facts.toolchain.nvcc_version, _nvcc_missing),
    "ninja": _ninja,
    "same_version": _same_version,
    "env": _env,
    "all_of": _all_of,
    "use": _all_of,
    "any_of": _any_of,
}


# --- fixes -----------------------------------------------------------------------------------

_VERSION_REF = re.compile(r"\{version:([A-Za-z0-9_.-]+)\}")


def fix_for(req: Requirement, ctx: Context) -> str | None:
    """The profile's fix (with `{version:DIST}` filled in), or a default one for the kind."""
    if req.fix:
        return _VERSION_REF.sub(lambda m: ctx.version(m.group(1)) or "<version>", req.fix)
    if req.kind == "package":
        if req.negate:
            return f"pip uninstall {req.arg}"
        spec = str(req.version) if req.version else ""
        return f"pip install '{req.arg}{spec}'" if spec else f"pip install {req.arg}"
    if req.kind == "same_version":
        a, b = _pair(req)
        return f"pip install {a}=={ctx.version(b) or '<' + b + ' version>'}"
    if req.kind == "ninja":
        return "pip install ninja"
    if req.kind == "nvcc":
        return "install the CUDA toolkit (nvcc) and set CUDA_HOME to it"
    if req.kind == "env" and req.arg:
        return f"export {req.arg}={req.equals or '1'}"
    return None
