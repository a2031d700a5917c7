"""Pick the backend to use and the knobs that select it, from an evaluation (static + live).

Pure. The order of choice: the user's `--prefer` when valid; otherwise the engine's own
automatic order restricted to backends valid here; otherwise the profile's general order.
"""

from __future__ import annotations

from dataclasses import dataclass

from fp4doctor.findings import Finding, Status
from fp4doctor.profile.model import KNOB_ARGUMENT, KNOB_CLI, KNOB_CONFIG, KNOB_ENV, Knob
from fp4doctor.rules import Evaluation
from fp4doctor.rules.backends import conditions_hold
from fp4doctor.rules.environment import selecting_knob

REQUIRE_ANY = "any"
REQUIRE_NATIVE = "native"


class ResolveError(ValueError):
    """A usage error: an unknown backend name. The message lists the valid ones."""


@dataclass(frozen=True)
class Resolution:
    chosen: str | None
    knob: Knob | None  # None when the engine's own automatic order already picks `chosen`
    set_env: tuple[tuple[str, str], ...] = ()
    unset_env: tuple[str, ...] = ()
    cli_args: tuple[tuple[str, str], ...] = ()
    config: tuple[tuple[str, str], ...] = ()  # dotted key -> value (a one-element list in YAML)
    arguments: tuple[tuple[str, str], ...] = ()
    ready: bool = False
    notes: tuple[str, ...] = ()  # explanations for stderr
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "chosen": self.chosen,
            "knob": None if self.knob is None else {"kind": self.knob.kind, "name": self.knob.name},
            "set_env": dict(self.set_env),
            "unset_env": list(self.unset_env),
            "cli_args": [list(a) for a in self.cli_args],
            "config": dict(self.config),
            "arguments": dict(self.arguments),
            "ready": self.ready,
            "notes": list(self.notes),
        }


def canonical(evaluation: Evaluation, name: str, what: str) -> str:
    backend = evaluation.profile.lookup(name)
    if backend is None:
        choices = ", ".join(evaluation.profile.choices())
        raise ResolveError(
            f"unknown backend {name!r} for {what} with target {evaluation.profile.target} "
            f"(valid: {choices})"
        )
    return backend.name


def resolve(
    evaluation: Evaluation, prefer: str | None = None, require: str | None = None
) -> Resolution:
    profile, era = evaluation.profile, evaluation.era
    label = evaluation.engine_label
    notes: list[str] = []
    findings: list[Finding] = []
    ctx = evaluation.context

    def reachable(name: str) -> bool:
        return selecting_knob(era, name) is not None or name == evaluation.engine_auto

    def usable(name: str) -> bool:
        return evaluation.valid(name) and reachable(name)

    def why_not(name: str) -> str:
        problems = evaluation.verdicts[name].problems()
        if problems:
            return "; ".join(dict.fromkeys(p.reason for p in problems[:3]))
        return f"{label} has no knob that selects it"

    preferred = canonical(evaluation, prefer, "--prefer") if prefer else None
    required = None
    if require not in (None, REQUIRE_ANY, REQUIRE_NATIVE):
        required = canonical(evaluation, require, "--require")  # type: ignore[arg-type]

    auto_order = [s.backend for s in era.auto if conditions_hold(s.conditions, ctx)]
    general = list(profile.backends)
    chosen: str | None = None
    if preferred is not None:
        if usable(preferred):
            chosen = preferred
        else:
            notes.append(f"{preferred} is not usable here: {why_not(preferred)}")
    if chosen is None:
        chosen = next((b for b in [*auto_order, *general] if usable(b)), None)
        if chosen is not None and preferred is not None:
            notes.append(f"falling back to {chosen}, the best backend that is valid here")

    # Say when the engine, left alone, would pick something that does not work here.
    auto = evaluation.engine_auto
    if auto is not None and not evaluation.valid(auto):
        findings.append(
            Finding(
                "resolve.engine_auto",
                Status.WARN,
                f"{label}, left alone, picks {auto}, which cannot run here: {why_not(auto)}",
                fix='eval "$(fp4doctor env)"' if chosen else None,
                backend=auto,
            )
        )
    elif auto is None and evaluation.facts.gpus:
        findings.append(
            Finding(
                "resolve.engine_auto",
                Status.WARN,
                f"{label}, left alone, finds no NVFP4 backend on this host and stops at model load",
            )
        )

    ready = chosen is not None
    if chosen is None:
        findings.append(
            Finding(
                "resolve.choice",
                Status.FAIL,
                f"no FP4 GEMM backend that {label} can use is valid on this host",
            )
        )
    else:
        findings.append(Finding("resolve.choice", Status.PASS, f"use {chosen}", backend=chosen))
    if required is not None and chosen != required:
        ready = False
        findings.append(
            Finding(
                "resolve.require",
                Status.FAIL,
                f"--require {required}: it is not usable here: {why_not(required)}",
                backend=required,
            )
        )
    elif require == REQUIRE_NATIVE and (chosen is None or not profile.backends[chosen].native):
        ready = False
        natives = [b for b in general if profile.backends[b].native]
        findings.append(
            Finding(
                "resolve.require",
                Status.FAIL,
                "--require native: no native FP4 backend is usable here "
                f"({', '.join(f'{b}: {why_not(b)}' for b in natives[:3])})",
            )
        )
    if chosen is None:
        return Resolution(
            chosen=None, knob=None, ready=False, notes=tuple(notes), findings=tuple(findings)
        )
    return _knobs(evaluation, chosen, ready, notes, findings)


def _knobs(
    evaluation: Evaluation, chosen: str, ready: bool, notes: list[str], findings: list[Finding]
) -> Resolution:
    era = evaluation.era
    label = evaluation.engine_label
    knob = selecting_knob(era, chosen)
    if knob is None:
        notes.append(
            f"{label} has no knob for {chosen}; its automatic order picks it once the "
            "conflicting variables are unset"
        )
    elif knob.deprecated:
        notes.append(f"{knob.name} is deprecated but is the only knob for {chosen} in {label}")
    unset = [k.name for k in era.env_knobs() if knob is None or k.name != knob.name]
    unset += [v for v in era.conflicts if v not in unset and (knob is None or v != knob.name)]
    set_env: list[tuple[str, str]] = []
    cli: list[tuple[str, str]] = []
    config: list[tuple[str, str]] = []
    arguments: list[tuple[str, str]] = []
    if knob is not None:
        value = knob.values[chosen][0]
        {KNOB_ENV: set_env, KNOB_CLI: cli, KNOB_CONFIG: config, KNOB_ARGUMENT: arguments}[
            knob.kind
        ].append((knob.name, value))
    return Resolution(
        chosen=chosen,
        knob=knob,
        set_env=tuple(set_env),
        unset_env=tuple(unset),
        cli_args=tuple(cli),
        config=tuple(config),
        arguments=tuple(arguments),
        ready=ready,
        notes=tuple(notes),
        findings=tuple(findings),
    )


def unknown_lint(evaluation: Evaluation) -> bool:
    """Whether the environment as set now would make the engine fail (blocking env findings)."""
    return any(f.status.blocking for f in evaluation.env_findings)
