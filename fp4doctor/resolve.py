"""Pick the backend to use and the knobs that select it, from an evaluation (static + live).

Pure. The order of choice: the user's `--prefer` when valid; otherwise the engine's own
automatic order restricted to backends valid here; otherwise the profile's general order.
Each FP4 GEMM family (dense linear, MoE) is resolved on its own; `meant_for` says which part of
a `--prefer`/`--require` value is meant for which family.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fp4doctor.findings import Finding, Kind, Status, Symptom
from fp4doctor.profile.model import (
    FAMILIES,
    FAMILY_LINEAR,
    KNOB_ARGUMENT,
    KNOB_CLI,
    KNOB_CONFIG,
    KNOB_ENV,
    Knob,
    Profile,
)
from fp4doctor.rules import Evaluation
from fp4doctor.suggest import did_you_mean

REQUIRE_ANY = "any"
REQUIRE_NATIVE = "native"


_WHAT = {FAMILY_LINEAR: "FP4 GEMM", "moe": "FP4 MoE"}


class ResolveError(ValueError):
    """A usage error: an unknown backend name. The message lists the valid ones."""


@dataclass(frozen=True)
class Resolution:
    """The backend chosen for one family, the knob that selects it, and why."""

    chosen: str | None
    knob: Knob | None  # None when the engine's own automatic order picks `chosen` (no preference)
    unset_env: tuple[str, ...] = ()
    ready: bool = False
    notes: tuple[str, ...] = ()  # explanations for stderr
    findings: tuple[Finding, ...] = ()

    def _setting(self, kind: str) -> tuple[tuple[str, str], ...]:
        """(name, value) of the knob to write, when it is of this kind."""
        if self.knob is None or self.chosen is None or self.knob.kind != kind:
            return ()
        return ((self.knob.name, self.knob.values[self.chosen][0]),)

    @property
    def set_env(self) -> tuple[tuple[str, str], ...]:
        """The variables to export: an env knob's own, and those any knob is written with."""
        if self.knob is None or self.chosen is None:
            return ()
        return (*self._setting(KNOB_ENV), *self.knob.env_for(self.chosen))

    @property
    def cli_args(self) -> tuple[tuple[str, str], ...]:
        """The flags to pass: a CLI knob's own, and those it is written with."""
        if self.knob is None or self.chosen is None:
            return ()
        return (*self._setting(KNOB_CLI), *self.knob.args_for(self.chosen))

    @property
    def config(self) -> tuple[tuple[str, str], ...]:
        """Dotted key -> value (a one-element list in the options YAML)."""
        return self._setting(KNOB_CONFIG)

    @property
    def arguments(self) -> tuple[tuple[str, str], ...]:
        return self._setting(KNOB_ARGUMENT)

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


def finding_id(family_name: str, name: str) -> str:
    """`resolve.choice` for the linear family, `resolve.moe.choice` for the MoE family."""
    return f"resolve.{name}" if family_name == FAMILY_LINEAR else f"resolve.{family_name}.{name}"


def _members(profile: Profile, name: str) -> list[str]:
    # In a family's view `flashinfer-cutlass` also names `flashinfer-cutlass-moe`.
    named = profile.lookup(name) or profile.lookup(f"{name}-{profile.family}")
    wanted = name.lower()
    members = [
        b.name
        for b in profile.backends.values()
        if b is not named and (wanted in b.aliases or b.name.endswith(f"-{wanted}"))
    ]
    return ([named.name] if named is not None else []) + members


def meant_for(profile: Profile, family_name: str, value: str | None, what: str) -> str | None:
    """The part of a `--prefer`/`--require` value meant for one family. A value is one or more
    comma-separated names, each optionally `FAMILY:NAME` (`moe:cutlass`); a name without a
    family applies to every family with a backend of that name or alias (and `native`/`any`
    to all). A name no family knows is a ResolveError listing the valid ones."""
    if value is None:
        return None
    families = profile.families()
    picked: list[str] = []
    for item in (p.strip() for p in value.split(",") if p.strip()):
        scope, sep, name = item.partition(":")
        if not sep:
            scope, name = "", item
        elif scope not in FAMILIES:
            raise ResolveError(
                f"{what} {item!r}: unknown family {scope!r} (valid: {', '.join(FAMILIES)})"
            )
        wanted = [scope] if scope else families
        if what == "--require" and name in (REQUIRE_ANY, REQUIRE_NATIVE):
            known = wanted
        else:
            known = [f for f in wanted if f in families and _members(profile.view(f), name)]
        if not known:
            views = [profile.view(f) for f in wanted if f in families]
            # Each name once: a name (cutlass, marlin) can be a backend or alias in two families.
            choices = ", ".join(dict.fromkeys(c for v in views for c in v.choices()))
            where = f" in the {scope} family" if scope else ""
            meant = did_you_mean(name, (c for v in views for c in v.choices()))
            raise ResolveError(
                f"unknown backend {name!r} for {what}{where} with target {profile.target}"
                f"{meant} (valid: {choices})"
            )
        if family_name in known:
            picked.append(name)
    if len(picked) > 1:
        raise ResolveError(
            f"{what} {value!r} names {len(picked)} backends of the {family_name} family: "
            "give one per family (e.g. 'cudnn,moe:cutlass')"
        )
    return picked[0] if picked else None


def family(evaluation: Evaluation, name: str, what: str) -> list[str]:
    """The backends a name means, best first: the backend it names (or whose alias it is), then
    the other members of its family (`cutlass` is also FlashInfer's `flashinfer-cutlass`).
    An unknown name is a ResolveError listing the valid ones."""
    profile = evaluation.profile
    found = _members(profile, name)
    if not found:
        choices = ", ".join(profile.choices())
        meant = did_you_mean(name, profile.choices())
        raise ResolveError(
            f"unknown backend {name!r} for {what} with target {profile.target}{meant} "
            f"(valid: {choices})"
        )
    return found


def resolve(
    evaluation: Evaluation, prefer: str | None = None, require: str | None = None
) -> Resolution:
    """Choose the backend and its knobs (see `_resolve`); its findings are the family's own."""
    resolution = _resolve(evaluation, prefer, require)
    family = evaluation.family
    return replace(
        resolution, findings=tuple(replace(f, family=family) for f in resolution.findings)
    )


def _resolve(
    evaluation: Evaluation, prefer: str | None = None, require: str | None = None
) -> Resolution:
    """Choose the backend and its knobs. `require` (NAME, 'native' or 'any') narrows what may be
    chosen, and a named requirement is also the preference; nothing else chosen is then ready."""
    profile, era = evaluation.profile, evaluation.era
    label = evaluation.engine_label
    notes: list[str] = []
    findings: list[Finding] = []
    fam = evaluation.family

    def usable(name: str) -> bool:
        reachable = era.selecting_knob(name) is not None or name == evaluation.engine_auto
        return evaluation.valid(name) and reachable

    def why_not(name: str) -> str:
        problems = evaluation.verdicts[name].problems()
        if problems:
            return "; ".join(dict.fromkeys(p.reason for p in problems[:3]))
        return f"{label} reaches it only through its automatic order, which picks another here"

    required_family: list[str] = []
    if require not in (None, REQUIRE_ANY, REQUIRE_NATIVE):
        required_family = family(evaluation, str(require), "--require")
    required = required_family[0] if required_family else None
    preferred_family = family(evaluation, prefer, "--prefer") if prefer else required_family
    preferred = preferred_family[0] if preferred_family else None
    allowed = list(profile.backends)
    if required_family:
        allowed = required_family
    elif require == REQUIRE_NATIVE:
        allowed = [b for b in allowed if profile.backends[b].native]

    if prefer and required_family and not any(b in allowed for b in preferred_family):
        # Both asked for, in different families: the requirement decides, and it is said.
        notes.append(
            f"--prefer {prefer} and --require {require} name different backends: "
            f"--require wins, --prefer {prefer} is not used"
        )
    engine_pick = evaluation.engine_pick
    auto_order = list(engine_pick.order)
    chosen: str | None = None
    for member in (b for b in preferred_family if b in allowed):
        if usable(member):
            chosen = member
            break
        if prefer:  # with --require alone, its own finding says why
            notes.append(f"{member} is not usable here: {why_not(member)}")
    if chosen is None:
        candidates = [b for b in dict.fromkeys([*auto_order, *profile.backends]) if b in allowed]
        valid = [b for b in candidates if usable(b)]
        # Established failures are already out; among the rest, a backend with no known risk
        # (a bug whose trigger is not established, or one that is slow here) comes first.
        clean = [b for b in valid if not evaluation.verdicts[b].risks()]
        chosen = clean[0] if clean else (valid[0] if valid else None)
        native = [b for b in valid if profile.backends[b].native]
        if chosen is not None and chosen not in native:
            # A weight-only fallback (Marlin, emulation) is slow for certain: it is not chosen
            # over a native FP4 backend ahead of it for a risk that is not established.
            ahead = [b for b in native if valid.index(b) < valid.index(chosen)]
            if ahead:
                chosen = next((b for b in clean if b in native), ahead[0])
        for b in valid[: valid.index(chosen)] if chosen in valid else []:
            risks = evaluation.verdicts[b].risks()
            why = (
                _risk_text(risks[0])
                if risks
                else "a weight-only fallback, slower than the native FP4 backends valid here"
            )
            notes.append(f"passing over {b}: {why}")
        if chosen is not None and preferred is not None:
            notes.append(f"falling back to {chosen}, the best backend that is valid here")
    elif chosen != preferred:
        notes.append(f"using {chosen}, of the same family as {prefer or require}")
    selection = evaluation.env_selection
    if selection is not None and chosen != selection.backend and usable(selection.backend):
        # The variables set select a backend that runs here: that is what the engine runs as
        # set (not a failure); the choice is advice, and says why it differs.
        risks = evaluation.verdicts[selection.backend].risks()
        notes.append(
            f"as set, {selection.variable}={selection.value} makes {label} run "
            f"{selection.backend}"
            + (f", with {_risk_text(risks[0])}" if risks else "")
            + f"; {chosen} is advised instead"
        )

    # Say when the engine, left alone, would pick something that does not work here.
    auto = engine_pick.backend
    if auto is not None and engine_pick.fails:
        # A known crash or wrong output on the backend the engine will pick as configured is
        # not a detour `env` takes care of: the host as it stands is not ready.
        # With --require or --prefer naming the backend chosen, the user passes its knob: the
        # engine's own pick is then not what runs (judged as set with that knob).
        named = chosen is not None and chosen in preferred_family
        broken = evaluation.env_selection is None and _known_bug(evaluation, auto) and not named
        findings.append(
            Finding(
                finding_id(fam, "engine_auto"),
                Status.FAIL if broken else Status.WARN,
                f"{label}, left alone, picks {auto}, which cannot run here: {why_not(auto)}",
                fix='eval "$(fp4doctor env)"' if chosen else None,
                backend=auto,
                kind=Kind.ENGINE_PICK,
            )
        )
    elif (
        auto is None and engine_pick.known and evaluation.facts.gpus and (era.auto or not era.knobs)
    ):
        # (A library used directly, with no automatic order but a knob, picks nothing by
        # itself: the caller chooses. Not a warning.)
        findings.append(
            Finding(
                finding_id(fam, "engine_auto"),
                Status.WARN,
                f"{label}, left alone, finds no NVFP4 backend on this host and stops at model load",
                kind=Kind.ENGINE_PICK,
            )
        )

    if chosen is not None:
        findings.append(
            Finding(
                finding_id(fam, "choice"),
                Status.PASS,
                f"use {chosen}",
                backend=chosen,
                kind=Kind.CHOICE,
            )
        )
    elif required is not None:
        findings.append(
            Finding(
                finding_id(fam, "require"),
                Status.FAIL,
                f"--require {require}: "
                + "; ".join(f"{b} is not usable here: {why_not(b)}" for b in required_family),
                backend=required,
                kind=Kind.REQUIRE,
            )
        )
    elif require == REQUIRE_NATIVE:
        natives = ", ".join(f"{b}: {why_not(b)}" for b in allowed[:3])
        findings.append(
            Finding(
                finding_id(fam, "require"),
                Status.FAIL,
                f"--require native: no native FP4 backend is usable here ({natives})",
                kind=Kind.REQUIRE,
            )
        )
    else:
        # A backend that would run here but that this release cannot reach: the fix is a
        # package change (its knob finding says which), not a knob.
        reachable_by_packages = [
            p for name in allowed if (p := _only_unreachable(evaluation, name)) is not None
        ]
        findings.append(
            Finding(
                finding_id(fam, "choice"),
                Status.FAIL,
                f"no {_WHAT[fam]} backend that {label} can use is valid on this host"
                + (
                    f"; {reachable_by_packages[0].backend} would run, but {label} "
                    "cannot select it as installed"
                    if reachable_by_packages
                    else ""
                ),
                fix=reachable_by_packages[0].fix if reachable_by_packages else None,
                kind=Kind.CHOICE,
            )
        )
    if chosen is None:
        return Resolution(
            chosen=None, knob=None, ready=False, notes=tuple(notes), findings=tuple(findings)
        )
    # With no preference, the engine's own choice is left to the engine (a knob would narrow
    # it: TensorRT-LLM's allowed list, for one, is profiled per shape).
    pin = preferred is not None or chosen != auto
    return _knobs(evaluation, chosen, pin, notes, findings)


def _risk_text(risk: Finding) -> str:
    """Why a backend that runs here is passed over, in a few words."""
    if risk.symptom is Symptom.SLOW and risk.established:
        return f"known to be slow here (advisory {risk.advisory})"
    what = risk.symptom.value if risk.symptom else "a problem"
    return f"a known {what} (advisory {risk.advisory}) if {risk.trigger}, not ruled out here"


def _only_unreachable(evaluation: Evaluation, backend: str) -> Finding | None:
    """The knob finding of a backend whose only problem is that the engine cannot reach it."""
    problems = evaluation.verdicts[backend].problems()
    if len(problems) == 1 and problems[0].kind is Kind.KNOB and problems[0].fix:
        return problems[0]
    return None


def _known_bug(evaluation: Evaluation, backend: str) -> bool:
    """Whether a known crash or wrong output (an advisory, not a missing requirement) is among
    what makes `backend` unusable here."""
    return any(
        f.kind is Kind.ADVISORY and f.status.blocking for f in evaluation.verdicts[backend].findings
    )


def _knobs(
    evaluation: Evaluation, chosen: str, pin: bool, notes: list[str], findings: list[Finding]
) -> Resolution:
    era = evaluation.era
    label = evaluation.engine_label
    knob = era.selecting_knob(chosen) if pin else None
    if knob is None and pin:
        notes.append(
            f"{label} has no knob for {chosen}; its automatic order picks it once the "
            "conflicting variables are unset"
        )
    elif knob is None:
        notes.append(f"{label} picks {chosen} by itself: nothing to set, only conflicts to unset")
    elif knob.deprecated:
        notes.append(f"{knob.name} is deprecated but is the only knob for {chosen} in {label}")
    keep = {knob.name, *(name for name, _ in knob.env_for(chosen))} if knob is not None else set()
    unset = [k.name for k in era.env_knobs() if k.name not in keep]
    # A knob fp4doctor never sets (VLLM_BATCH_INVARIANT) is unset because it overrides the
    # choice: say so, rather than leave a bare `unset` to wonder about (where it is not set
    # here, the output may be applied where it is).
    env = evaluation.context.env
    notes += [
        f"unsets {k.name}{'' if k.name in env else ' (not set here)'}: "
        f"{k.note or 'it overrides the choice'}"
        for k in era.env_knobs()
        if not k.select and k.name in unset
    ]
    unset += [v for v in era.conflicts if v not in unset and v not in keep]
    return Resolution(
        chosen=chosen,
        knob=knob,
        unset_env=tuple(unset),
        ready=True,
        notes=tuple(notes),
        findings=tuple(findings),
    )
