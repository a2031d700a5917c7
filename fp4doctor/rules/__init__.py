"""The rules stage: host facts + a profile (+ live results) -> findings per backend and GPU.

Pure: no I/O, no imports of the libraries being judged. `evaluate` is the one entry point; it is
also where `--ignore` is applied, once, before validity is derived from the findings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from fp4doctor import facts as F
from fp4doctor.findings import Finding, Status, apply_ignores
from fp4doctor.profile.kinds import Context
from fp4doctor.profile.model import FAMILY_LINEAR, Era, Profile
from fp4doctor.rules import live
from fp4doctor.rules.backends import (
    Verdict,
    conditions_hold,
    evaluate_backend,
    requirement_findings,
)
from fp4doctor.rules.environment import Selection, lint
from fp4doctor.versions import bounds, contains

if TYPE_CHECKING:  # the smoke package is imported only where live GEMMs run
    from fp4doctor.smoke.result import SmokeResult

__all__ = ["EngineVersion", "Evaluation", "Verdict", "evaluate"]

SOURCE_INSTALLED = "installed"
SOURCE_OVERRIDE = "--engine-version"
SOURCE_ASSUMED = "newest the profile knows"
FIX_GPU_UNREADABLE = (
    "run `nvidia-smi` and check `dmesg` for an Xid error (79: fallen off the bus); a lost GPU "
    "needs a reset (nvidia-smi -r -i N) or a reboot, or leave it out with CUDA_VISIBLE_DEVICES"
)


@dataclass(frozen=True)
class EngineVersion:
    """The engine version judged, and where it comes from."""

    version: str
    source: str  # SOURCE_INSTALLED | SOURCE_OVERRIDE | SOURCE_ASSUMED
    note: str | None = None
    covered: bool = True  # False: older than every era the profile knows (no verdict)


@dataclass(frozen=True)
class Evaluation:
    """Everything the rules concluded (live results folded in, --ignore applied)."""

    profile: Profile
    facts: F.HostFacts
    context: Context
    engine: EngineVersion
    era: Era
    host: tuple[Finding, ...]
    verdicts: Mapping[str, Verdict]
    env_findings: tuple[Finding, ...]
    env_selection: Selection | None
    # The engine's own automatic order among the backends whose conditions hold here, best
    # first; its first entry is what the engine picks when left alone (none without a GPU:
    # the engine stops before choosing).
    auto_order: tuple[str, ...]
    smoke: tuple[Finding, ...] = ()  # live results that belong to no backend (the CPU run)

    @property
    def engine_label(self) -> str:
        return f"{self.profile.title} {self.engine.version}"

    @property
    def family(self) -> str:
        """The FP4 GEMM family judged (the profile is that family's view)."""
        return self.profile.family or FAMILY_LINEAR

    @property
    def engine_auto(self) -> str | None:
        return self.auto_order[0] if self.auto_order and self.facts.gpus else None

    def valid(self, backend: str) -> bool:
        verdict = self.verdicts.get(backend)
        return verdict is not None and verdict.valid

    def all_findings(self) -> list[Finding]:
        out = list(self.host)
        for v in self.verdicts.values():
            out.extend(v.findings)
        out.extend(self.smoke)
        out.extend(self.env_findings)
        return out

    @property
    def no_verdict(self) -> bool:
        """True when the facts or the version are too far off to judge (exit code 3)."""
        return not self.engine.covered or any(
            f.id == "host.gpus" and f.status is Status.ERROR and not f.ignored for f in self.host
        )


def engine_version(profile: Profile, host: F.HostFacts, override: str | None) -> EngineVersion:
    """Which engine version to judge for: --engine-version, the installed one, or the newest."""
    if override is not None:
        return EngineVersion(override, SOURCE_OVERRIDE)
    installed = host.packages.version(profile.engine.package)
    if installed is not None:
        try:
            Version(installed)
            return EngineVersion(installed, SOURCE_INSTALLED)
        except InvalidVersion:
            note = (
                f"installed {profile.engine.package} {installed!r} is not a version "
                "fp4doctor can read"
            )
            return EngineVersion(profile.engine.newest_known, SOURCE_ASSUMED, note)
    note = (
        f"{profile.engine.package} is not installed: judging for {profile.title} "
        f"{profile.engine.newest_known}, the newest version the profile knows "
        f"(--engine-version to choose another)"
    )
    return EngineVersion(profile.engine.newest_known, SOURCE_ASSUMED, note)


def era_for(profile: Profile, engine: EngineVersion) -> tuple[Era, EngineVersion]:
    """The era that judges `engine`, and the engine version with a note when the profile does
    not cover it: newer than it knows (judged by the newest era, said), or older than its first
    era (not judged at all: no verdict)."""
    for era in profile.eras:
        if contains(era.versions, engine.version):
            newest = Version(profile.engine.newest_known)
            if Version(Version(engine.version).public) > newest:
                return era, _noted(
                    engine,
                    f"{profile.title} {engine.version} is newer than this profile knows "
                    f"({newest}); judging with the rules of its newest era",
                )
            return era, engine
    oldest = bounds(profile.eras[0].versions)[0]
    return profile.eras[0], _noted(
        replace(engine, covered=False),
        f"{profile.title} {engine.version} is older than any version this profile covers "
        f"({oldest} to {profile.engine.newest_known}): fp4doctor cannot judge it",
    )


def _noted(engine: EngineVersion, note: str) -> EngineVersion:
    return replace(engine, note="; ".join(n for n in (engine.note, note) if n))


def evaluate(
    profile: Profile,
    host: F.HostFacts,
    *,
    env: Mapping[str, str] | None = None,
    override_version: str | None = None,
    live_results: Sequence[SmokeResult] = (),
    ignore: Iterable[str] = (),
    family: str = FAMILY_LINEAR,
) -> Evaluation:
    """Judge every backend of one FP4 GEMM family of `profile` on `host` (with the live results,
    when any ran), and lint the environment's variables of that family. `ignore` downgrades the
    named failures to warnings, here only."""
    profile = profile.view(family)
    engine = engine_version(profile, host, override_version)
    era, engine = era_for(profile, engine)
    versions = dict(host.packages.versions)
    package = F.canonical_name(profile.engine.package)
    if engine.source == SOURCE_OVERRIDE:
        versions[package] = engine.version  # judge as if that version were installed
    ctx = Context(
        facts=host,
        versions=versions,
        env=dict(host.env if env is None else env),
        engine=(package, engine.version),
    )
    label = f"{profile.title} {engine.version}"
    patterns = tuple(ignore)
    verdicts = {
        backend.name: evaluate_backend(backend, ctx, era, profile, label)
        for backend in profile.backends.values()
    }
    verdicts, unowned = live.merge(profile, verdicts, live_results)
    verdicts = {
        name: replace(v, findings=tuple(apply_ignores(v.findings, patterns)))
        for name, v in verdicts.items()
    }
    env_findings, selection = lint(profile, era, ctx, verdicts, label)
    auto_order = tuple(s.backend for s in era.auto if conditions_hold(s.conditions, ctx))
    return Evaluation(
        profile=profile,
        facts=host,
        context=ctx,
        engine=engine,
        era=era,
        host=tuple(
            apply_ignores(
                host_findings(host) + requirement_findings(profile.engine.requires, ctx, "engine"),
                patterns,
            )
        ),
        verdicts=verdicts,
        env_findings=tuple(apply_ignores(env_findings, patterns)),
        env_selection=selection,
        auto_order=auto_order,
        smoke=tuple(apply_ignores(unowned, patterns)),
    )


def host_findings(host: F.HostFacts) -> list[Finding]:
    """What the host itself says: GPUs seen (or why none), a mixed host, probe failures."""
    out: list[Finding] = []
    nvml = host.nvml
    cvd = host.cuda_visible_devices
    scope = f" (CUDA_VISIBLE_DEVICES={cvd})" if cvd is not None else ""
    if host.gpus:
        names = Counter(f"{g.name} (compute capability {g.cc_text})" for g in host.gpus)
        listed = ", ".join(f"{n}× {name}" for name, n in names.items())
        out.append(
            Finding(
                "host.gpus",
                Status.PASS,
                f"{len(host.gpus)} GPU(s) visible{scope}: {listed}",
                details={"driver": nvml.driver_version, "cuda_driver": nvml.cuda_driver_version},
            )
        )
        ccs = sorted({g.cc_text for g in host.gpus})
        if len(ccs) > 1:
            out.append(
                Finding(
                    "host.gpus.mixed",
                    Status.WARN,
                    "mixed host: the GPUs differ in compute capability "
                    f"({', '.join(ccs)}); a backend "
                    "counts as valid only when it is valid on every GPU the engine will use",
                    fix="restrict the engine to one kind of GPU with CUDA_VISIBLE_DEVICES",
                )
            )
    elif nvml.status in (F.NVML_OK, F.NVML_NO_GPU):
        why = (
            "NVML answered but lists no GPU"
            if nvml.status == F.NVML_OK or not nvml.error
            else nvml.error
        )
        if cvd is not None and nvml.status == F.NVML_OK:
            why = f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU"
        out.append(
            Finding(
                "host.gpus",
                Status.FAIL,
                f"no NVIDIA GPU is visible{scope}: {why}; no FP4 backend can run",
                fix=nvml.fix,
            )
        )
    elif nvml.status == F.NVML_LIBRARY_NOT_FOUND:
        out.append(
            Finding(
                "host.gpus",
                Status.FAIL,
                "no NVIDIA GPU is visible: the NVIDIA driver's NVML library (libnvidia-ml) is not "
                "installed, so this is not a GPU host; every FP4 backend needs an NVIDIA GPU "
                "(native FP4 needs compute capability 10.0 or newer)",
                fix=nvml.fix,
                details={"nvml_error": nvml.error},
            )
        )
    else:
        out.append(
            Finding(
                "host.gpus",
                Status.ERROR,
                f"cannot tell which GPUs this host has: NVML says {nvml.error or nvml.status}",
                fix=nvml.fix,
                details={"nvml_status": nvml.status},
            )
        )
    for name, version in sorted(host.packages.versions.items()):
        try:
            Version(version)
        except InvalidVersion:
            out.append(
                Finding(
                    f"host.package.{name}.version",
                    Status.WARN,
                    f"{name} reports the version {version!r}, which is not a PEP 440 version: "
                    "rules that depend on it are judged as for a fresh install",
                    fix=f"pip install --force-reinstall {name}",
                )
            )
    for name, reason in sorted(host.probe_errors.items()):
        # `gpu.nvmlN`: NVML lists a GPU it cannot open or describe (lost, fallen off the bus).
        fix = FIX_GPU_UNREADABLE if name.startswith("gpu.nvml") else None
        reason = f"the {name} probe failed: {reason}"
        out.append(Finding(f"host.probe.{name}", Status.WARN, reason, fix=fix))
    for name, reason in sorted(host.packages.errors.items()):
        # Unreadable metadata (or torch/version.py): the rules judge without what it says.
        package = name.split("/")[0]
        what = name if "/" in name else f"the installed {name}'s metadata"
        out.append(
            Finding(
                f"host.package.{package}",
                Status.WARN,
                f"cannot read {what}, so the rules judge without it: {reason}",
                fix=f"reinstall {package} at the version you use "
                f"(pip install --force-reinstall --no-deps '{package}==VERSION')",
            )
        )
    if host.synthetic:
        out.append(Finding("host.synthetic", Status.WARN, f"synthetic facts: {host.synthetic}"))
    return out
