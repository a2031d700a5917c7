"""The rules stage: host facts + a profile (+ live results) -> findings per backend and GPU.

Pure: no I/O, no imports of the libraries being judged. `evaluate` is the one entry point; it is
also where `--ignore` is applied, once, before validity is derived from the findings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from fp4doctor import facts as F
from fp4doctor.deployment import Deployment
from fp4doctor.findings import Finding, Kind, Status, apply_ignores
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
from fp4doctor.rules.host import FIX_GPU_UNREADABLE, host_findings, says_no_verdict
from fp4doctor.versions import bounds, contains, same_version

if TYPE_CHECKING:  # the smoke package is imported only where live GEMMs run
    from fp4doctor.smoke.result import SmokeResult

__all__ = ["FIX_GPU_UNREADABLE", "EngineVersion", "Evaluation", "Unverified", "Verdict", "evaluate"]

SOURCE_INSTALLED = "installed"
SOURCE_OVERRIDE = "--engine-version"
SOURCE_ASSUMED = "newest the profile knows"


@dataclass(frozen=True)
class EngineVersion:
    """The engine version judged, and where it comes from."""

    version: str
    source: str  # SOURCE_INSTALLED | SOURCE_OVERRIDE | SOURCE_ASSUMED
    note: str | None = None
    covered: bool = True  # False: older than every era the profile knows (no verdict)


@dataclass(frozen=True)
class Unverified:
    """A release the judgement rests on that is newer than the release data its rules were read
    from (profiles/releases.yaml): the rules of the newest release known are extrapolated."""

    package: str
    version: str  # installed, or the --engine-version asked for
    newest_known: str

    @property
    def text(self) -> str:
        return (
            f"{self.package} {self.version} is newer than the newest release fp4doctor's rules "
            f"were read from ({self.newest_known}): its rules are extrapolated from "
            f"{self.newest_known}, not verified"
        )

    def to_dict(self) -> dict[str, str]:
        return {"package": self.package, "version": self.version, "newest_known": self.newest_known}


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
    # first (what it picks, left alone, knowing the model too: `engine_pick`).
    auto_order: tuple[str, ...]
    smoke: tuple[Finding, ...] = ()  # live results that belong to no backend (the CPU run)
    # With a model (its fold): every FP4 layer of this family is weight-only (W4A16), and the
    # backends the engine's automatic order passes over for the model, with the reason.
    weight_only: bool = False
    checkpoint_format: str | None = None  # the model's (fp4doctor.checkpoint.quant FORMATS)
    skips: Mapping[str, Finding] = field(default_factory=dict)
    unverified: tuple[Unverified, ...] = ()  # releases newer than the release data

    @property
    def verified(self) -> bool:
        """False when a release judged is newer than the data the rules were read from."""
        return not self.unverified

    @property
    def engine_label(self) -> str:
        return f"{self.profile.title} {self.engine.version}"

    @property
    def family(self) -> str:
        """The FP4 GEMM family judged (the profile is that family's view)."""
        return self.profile.family or FAMILY_LINEAR

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
        return not self.engine.covered or says_no_verdict(self.host)


def with_alternatives(verdict: Verdict, verdicts: Mapping[str, Verdict]) -> Verdict:
    """A known bug's fix names the backends to use instead only where they are valid here (a
    fix never points at a backend the same report refuses)."""
    out = []
    for f in verdict.findings:
        alternatives = f.details.get("alternatives") if f.kind is Kind.ADVISORY else None
        if alternatives and f.status is not Status.PASS:
            valid = [a for a in alternatives if a in verdicts and verdicts[a].valid]
            if valid:
                instead = f"or use {' or '.join(valid)}"
                f = replace(f, fix=f"{f.fix}; {instead}" if f.fix else instead)
        out.append(f)
    return replace(verdict, findings=tuple(out))


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
                    f"({newest}); judging with the rules of its newest era (unverified)",
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
    deployment: Deployment | None = None,
    args: Mapping[str, str] | None = None,
) -> Evaluation:
    """Judge every backend of one FP4 GEMM family of `profile` on `host` (with the live results,
    when any ran), and lint the environment's variables of that family. `ignore` downgrades the
    named failures to warnings, here only. `args`: the engine's flags as the command line sets
    them (a CLI knob there selects a backend)."""
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
        deployment=deployment or Deployment(),
        args=dict(args or {}),
    )
    label = f"{profile.title} {engine.version}"
    patterns = tuple(ignore)
    fam = profile.family or FAMILY_LINEAR

    def owned(findings: Iterable[Finding]) -> tuple[Finding, ...]:
        """This family's findings, marked as its own, with --ignore applied."""
        return tuple(replace(f, family=fam) for f in apply_ignores(findings, patterns))

    verdicts = {
        backend.name: evaluate_backend(backend, ctx, era, profile, label)
        for backend in profile.backends.values()
    }
    verdicts, unowned = live.merge(profile, verdicts, live_results)
    verdicts = {name: with_alternatives(v, verdicts) for name, v in verdicts.items()}
    verdicts = {name: replace(v, findings=owned(v.findings)) for name, v in verdicts.items()}
    env_findings, selection = lint(profile, era, ctx, verdicts, label)
    auto_order = tuple(s.backend for s in era.auto if conditions_hold(s.conditions, ctx))
    unverified = beyond_the_data(profile, versions)
    return Evaluation(
        profile=profile,
        facts=host,
        context=ctx,
        engine=engine,
        era=era,
        host=tuple(
            apply_ignores(
                host_findings(host)
                + [
                    Finding(f"engine.unverified.{u.package}", Status.WARN, u.text, kind=Kind.ENGINE)
                    for u in unverified
                ]
                + install_findings(profile, engine)
                + requirement_findings(profile.engine.requires, ctx, "engine", kind=Kind.ENGINE),
                patterns,
            )
        ),
        verdicts=verdicts,
        env_findings=owned(env_findings),
        env_selection=selection,
        auto_order=auto_order,
        smoke=owned(unowned),
        unverified=unverified,
    )


def install_findings(profile: Profile, engine: EngineVersion) -> list[Finding]:
    """An engine release judged but not installed whose FlashInfer pin the package index does
    not have: getting there takes FlashInfer from elsewhere (said, not a failure)."""
    if engine.source == SOURCE_INSTALLED:
        return []
    pin = next(
        (p for v, p in profile.engine.unavailable_pins if same_version(v, engine.version)), None
    )
    if pin is None:
        return []
    package = profile.engine.package
    return [
        Finding(
            f"engine.install.{package}",
            Status.WARN,
            f"{package} {engine.version} pins {pin}, which the package index does not have: "
            f"`pip install {package}=={engine.version}` fails from the index alone",
            fix=f"install {pin.split('==')[0]} from FlashInfer's own wheel index first, or "
            f"pick another {package} release",
            source="Requires-Dist of the released wheel's METADATA, against the releases on "
            "https://pypi.org/project/flashinfer-python/ (profiles/releases.yaml)",
            kind=Kind.ENGINE,
        )
    ]


def beyond_the_data(profile: Profile, versions: Mapping[str, str]) -> tuple[Unverified, ...]:
    """The packages judged at a release newer than the release data (`engine.newest_read`);
    a pre-release or local build of the newest release known counts as known."""
    out = []
    for package, newest in profile.engine.newest_read:
        version = versions.get(F.canonical_name(package))
        if version is None:
            continue
        try:
            newer = Version(Version(version).public) > Version(newest)
        except InvalidVersion:
            continue  # host_findings says the version cannot be read
        if newer:
            out.append(Unverified(package, version, newest))
    return tuple(out)
