"""Evaluate each backend of a profile on each GPU: the static verdict, as findings."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from packaging.specifiers import SpecifierSet

from fp4doctor.facts import Gpu
from fp4doctor.findings import Finding, Kind, Status, Symptom
from fp4doctor.profile.kinds import Check, Context
from fp4doctor.profile.kinds.all_of import AllOf
from fp4doctor.profile.kinds.base import Requirement
from fp4doctor.profile.kinds.compute_capability import ComputeCapability
from fp4doctor.profile.kinds.package import Package
from fp4doctor.profile.kinds.use import Use
from fp4doctor.profile.model import Advisory, AutoStep, Backend, Era, Profile
from fp4doctor.profile.triggers import Settled
from fp4doctor.rules.severity import severity
from fp4doctor.versions import spec_text


@dataclass(frozen=True)
class Verdict:
    """A backend's findings; valid when none of them blocks (after --ignore)."""

    backend: Backend
    findings: tuple[Finding, ...] = ()

    @cached_property
    def valid(self) -> bool:
        """Computed once per verdict: `with_alternatives` asks it per finding, and a snapshot
        of thousands of GPUs has thousands of findings (quadratic once: 27 s for 4,000 GPUs)."""
        return not any(f.status.blocking for f in self.findings)

    def problems(self) -> list[Finding]:
        """Blocking findings, one per rule (the first GPU that fails it), most telling first:
        hardware (nothing else fixes it), then an engine version that cannot use the backend at
        all (installing its libraries would not help), then the rest."""
        blocking: dict[tuple[Kind, str | None, str | None], Finding] = {}
        for f in self.findings:
            if f.status.blocking:
                blocking.setdefault((f.kind, f.rule, f.advisory), f)
        return sorted(
            blocking.values(),
            key=lambda f: (f.kind is not Kind.HARDWARE, f.kind is not Kind.KNOB),
        )

    def risks(self) -> list[Finding]:
        """Known bugs that may strike (a crash, wrong output or hang whose trigger is not
        established) or that make it slow here (established): the backend runs, and a clean one
        is chosen before it. A slowness whose trigger is not established is no reason to leave
        the engine's own pick, nor is a bug whose trigger nothing can settle (`depends_on`
        alone: timing, the allocator, the caller's arguments), which weighs on every backend."""
        slow = Symptom.SLOW
        return [
            f
            for f in self.findings
            if f.kind is Kind.ADVISORY
            and f.status is Status.WARN
            and (f.established if f.symptom is slow else "settle" in f.details)
        ]

    def first_problem(self) -> Finding | None:
        problems = self.problems()
        return problems[0] if problems else None


def holds(req: Requirement, ctx: Context) -> Check:
    """A requirement over the whole host: per-GPU kinds must hold on every GPU."""
    if not req.per_gpu or not ctx.gpus:
        return req.check(ctx, None)
    results = [req.check(ctx, g) for g in ctx.gpus]
    failed = [r for r in results if not r.ok]
    return failed[0] if failed else results[0]


def conditions_hold(conditions: tuple[Requirement, ...], ctx: Context) -> bool:
    return all(holds(c, ctx).ok for c in conditions if c.applies(ctx))


SYMPTOM_VALUES = {s.value for s in Symptom}
_SYMPTOM_WORDS = {
    "crash": "crash",
    "wrong-output": "wrong output",
    "hang": "hang",
    "slow": "slowness",
}


def evaluate_backend(
    backend: Backend, ctx: Context, era: Era, profile: Profile, engine_label: str
) -> Verdict:
    findings = requirement_findings(backend.requires, ctx, f"backend.{backend.name}", backend.name)
    for advisory in backend.advisories:
        findings.extend(_advisory(advisory, backend, ctx))
    findings.append(_reachability(backend, era, profile, engine_label, ctx))
    return Verdict(backend, tuple(findings))


def requirement_findings(
    requires: tuple[Requirement, ...],
    ctx: Context,
    prefix: str,
    backend: str | None = None,
    kind: Kind = Kind.REQUIREMENT,
) -> list[Finding]:
    """A finding per applicable requirement (per GPU for per-GPU kinds), named `prefix.id`."""
    findings: list[Finding] = []
    seen: set[str] = set()
    for req in _flatten(requires, ctx):
        if req.id in seen:
            continue
        seen.add(req.id)
        for gpu, result in _per_gpu(req, ctx):
            findings.append(
                Finding(
                    id=f"{prefix}.{req.id}" + (f".gpu{gpu.index}" if gpu else ""),
                    status=_status(result),
                    reason=_reason(result, req.reason if not result.ok else None),
                    fix=None if result.ok else req.fix_for(ctx),
                    gpu=gpu.index if gpu else None,
                    backend=backend,
                    source=req.source,
                    details={"measured": result.measured, "required": result.required},
                    kind=Kind.HARDWARE
                    if kind is Kind.REQUIREMENT and isinstance(req.kind, ComputeCapability)
                    else kind,
                    rule=req.id,
                )
            )
    return findings


def _ahead(backend: Backend, era: Era, ctx: Context) -> tuple[AutoStep, ...]:
    """The steps of the automatic order that hold here and come before the first step of
    `backend` that holds: the engine picks one of them first. Empty without a GPU (the engine
    stops before choosing) or when no step of `backend` holds."""
    if not ctx.gpus:
        return ()
    ahead: list[AutoStep] = []
    for step in era.auto:
        if not conditions_hold(step.conditions, ctx):
            continue
        if step.backend == backend.name:
            return tuple(ahead)
        ahead.append(step)
    return ()


def _uninstalls(steps: tuple[AutoStep, ...], ctx: Context) -> list[str]:
    """The installed packages whose presence makes these steps hold (removing them is what
    lets the engine fall through to a later step). A condition whose `when` does not apply
    here, or a package that is not installed, is not what makes a step hold."""
    names: list[str] = []

    def walk(reqs: tuple[Requirement, ...]) -> None:
        for req in reqs:
            if not req.applies(ctx):
                continue
            kind = req.kind
            if isinstance(kind, Package) and not kind.absent and kind.version is None:
                if ctx.version(kind.name) is not None:
                    names.append(kind.name)
            elif isinstance(kind, (Use, AllOf)):
                walk(req.children)

    for step in steps:
        walk(step.conditions)
    return list(dict.fromkeys(names))


def _flatten(reqs: tuple[Requirement, ...], ctx: Context) -> list[Requirement]:
    """The applicable requirements, with named conditions (`use`) expanded into their parts,
    so that each part is its own finding with its own fix and source."""
    out: list[Requirement] = []
    for req in reqs:
        if not req.applies(ctx):
            continue
        out.extend(_flatten(req.children, ctx) if isinstance(req.kind, Use) else [req])
    return out


def _per_gpu(req: Requirement, ctx: Context) -> list[tuple[Gpu | None, Check]]:
    if req.per_gpu and ctx.gpus:
        results: list[tuple[Gpu | None, Check]] = [(g, req.check(ctx, g)) for g in ctx.gpus]
        # A fact not read here (a binary not installed) is the same on every GPU: said once.
        first = results[0][1]
        if len(results) > 1 and all(not r.read and r == first for _, r in results):
            return [(None, first)]
        return results
    return [(None, req.check(ctx, None))]


def _status(result: Check) -> Status:
    """pass, fail, or skip for a fact that could not be read here (never a pass)."""
    if not result.read:
        return Status.SKIP
    return Status.PASS if result.ok else Status.FAIL


def _reason(result: Check, why: str | None) -> str:
    if result.ok:
        return f"{result.measured} (needs {result.required})"
    text = f"{result.measured}; needs {result.required}"
    return f"{text}: {why}" if why else text


_EFFECT_WORDS = {
    "crash": "crashes",
    "wrong-output": "gives wrong output",
    "hang": "hangs",
    "slow": "is slow",
}


def _advisory(advisory: Advisory, backend: Backend, ctx: Context) -> list[Finding]:
    """A finding per GPU (or one for the host) where every condition of the advisory holds.

    Its status is the severity policy's (`rules/severity.py`): it fails as the effect says (a
    crash, wrong output or hang) only when its trigger is established here and its evidence is
    at least a read fix diff; ruled out, it passes, saying why; otherwise it warns, naming what
    is not known (and how to settle it) or why it is held back."""
    gpus: list[Gpu | None] = list(ctx.gpus) if advisory.per_gpu and ctx.gpus else [None]
    active = [c for c in advisory.conditions if c.applies(ctx)]
    words = _EFFECT_WORDS.get(advisory.effect)
    bug = f"known bug: {backend.name} {words} here: {advisory.reason}" if words else advisory.reason
    trigger = advisory.trigger
    settled, known = trigger.judge(ctx.deployment, backend.family)
    when = trigger.describe() or None
    settle = trigger.settle(ctx.deployment, backend.family)
    what = _SYMPTOM_WORDS.get(advisory.effect, "problem")
    out = []
    for gpu in gpus:
        checks = [c.check(ctx, gpu) for c in active]
        in_range = bool(active) and all(c.ok for c in checks)
        judged = severity(
            in_range=in_range, effect=advisory.effect, evidence=advisory.evidence, settled=settled
        )
        if judged is None:
            continue
        fix, reason = advisory.fix, bug
        if judged.status is Status.PASS:
            fix = None
            reason = f"known bug {advisory.id} does not strike here ({known}): it needs {when}"
        elif settled is Settled.UNKNOWN:
            under = f"; it {when}" if when and when.startswith("depends on") else f" {_with(when)}"
            reason = (
                f"possible {what}{under}, not established here ({known}); "
                f"`fp4doctor advisories` describes {advisory.id}"
            )
            fix = "; ".join(
                p for p in (f"settle it with {settle}" if settle else None, advisory.fix) if p
            )
        elif judged.held_back:
            reason = (
                f"possible {what} here ({known}), not established: {judged.held_back}; "
                f"`fp4doctor advisories` describes {advisory.id}"
            )
        # What here falls in the advisory's range ("flashinfer-python 0.6.8.post1"), for the
        # short form of the finding the report leads with.
        details: dict[str, object] = {"effect": advisory.effect, "here": "; ".join(
            dict.fromkeys(c.measured for c in checks if c.measured))}  # fmt: skip
        if advisory.evidence:
            details["evidence"] = advisory.evidence
        if advisory.alternatives:
            details["alternatives"] = list(advisory.alternatives)
        if settled is Settled.UNKNOWN and settle:
            details["settle"] = settle
        if advisory.fixed_in:
            details["fixed_in"] = advisory.fixed_in
        out.append(
            Finding(
                id=f"backend.{backend.name}.advisory.{advisory.id}"
                + (f".gpu{gpu.index}" if gpu else ""),
                status=judged.status,
                reason=reason,
                fix=fix or None,
                gpu=gpu.index if gpu else None,
                backend=backend.name,
                source=advisory.source,
                details=details,
                kind=Kind.ADVISORY,
                advisory=advisory.id,
                trigger=when,
                established=settled is Settled.HOLDS and judged.held_back is None,
                symptom=Symptom(advisory.effect) if advisory.effect in SYMPTOM_VALUES else None,
            )
        )
    return out


def _reachability(
    backend: Backend, era: Era, profile: Profile, engine_label: str, ctx: Context
) -> Finding:
    """Can this engine version use the backend at all: through a knob, or its automatic order
    (and then only when no earlier step of that order holds here)."""
    ahead = _ahead(backend, era, ctx)
    fid = f"backend.{backend.name}.knob"
    knob = era.selecting_knob(backend.name)
    if knob is not None:
        return Finding(
            fid,
            Status.PASS,
            f"{engine_label} selects it with {knob.how(backend.name)}",
            backend=backend.name,
            source=knob.source or era.source,
            kind=Kind.KNOB,
        )
    if ahead:
        # No knob, and the automatic order stops earlier here: only a package change helps.
        first = ahead[0].backend
        later = _versions_that_can(backend, era, profile, knobs_only=True)
        removals = _uninstalls(ahead, ctx)
        fixes = [f"pip uninstall {' '.join(removals)}"] if removals else []
        fixes += [f"use {later}"] if later else []
        return Finding(
            fid,
            Status.FAIL,
            f"{engine_label} has no knob for it, and its automatic order picks {first} first "
            "on this host",
            fix=", or ".join(fixes) or None,
            backend=backend.name,
            source=era.source,
            kind=Kind.KNOB,
        )
    if any(step.backend == backend.name for step in era.auto):
        return Finding(
            fid,
            Status.PASS,
            f"{engine_label} has no knob for it; only its automatic order reaches it",
            backend=backend.name,
            source=era.source,
            kind=Kind.KNOB,
        )

    versions = _versions_that_can(backend, era, profile, knobs_only=False)
    return Finding(
        fid,
        Status.FAIL,
        f"{engine_label} has no way to use it" + (f" ({versions} can)" if versions else ""),
        fix=f"use {versions}" if versions else None,
        backend=backend.name,
        source=era.source,
        kind=Kind.KNOB,
    )


def _versions_that_can(
    backend: Backend, era: Era, profile: Profile, *, knobs_only: bool
) -> str | None:
    """The nearest run of eras that can use the backend (by a knob, or also by the automatic
    order unless `knobs_only`), newer ones first, as "vLLM >=0.24"; None when none can."""

    def usable(e: Era) -> bool:
        if any(k.select and backend.name in k.values for k in e.knobs):
            return True
        return not knobs_only and any(step.backend == backend.name for step in e.auto)

    # The nearest run of eras that can: newer ones first, else older ones.
    eras = list(profile.eras)
    here = eras.index(era)
    later = [i for i in range(here + 1, len(eras)) if usable(eras[i])]
    earlier = [i for i in range(here - 1, -1, -1) if usable(eras[i])]
    versions = None
    if later or earlier:
        first = last = later[0] if later else earlier[0]
        step = 1 if later else -1
        while 0 <= last + step < len(eras) and usable(eras[last + step]):
            last += step
        low, high = sorted((first, last))
        bounds = [x for x in eras[low].versions if x.operator.startswith(">")] + [
            x for x in eras[high].versions if x.operator.startswith("<")
        ]
        versions = f"{profile.title} {spec_text(SpecifierSet(','.join(map(str, bounds))))}"
    return versions


def _with(condition: str | None) -> str:
    """ "with CONDITION", once: an advisory's condition may begin with its own "with" ("with
    --model: ..."), and once read "possible wrong output with with --model"."""
    text = condition or "its trigger"
    return text if text.startswith("with ") else f"with {text}"
