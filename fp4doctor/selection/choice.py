"""Pick the backend to use and the knobs that select it, from an evaluation (static + live).

Pure. The order of choice: the user's `--prefer` when valid; otherwise the engine's own
automatic order restricted to backends valid here; otherwise the profile's general order.
Each FP4 GEMM family (dense linear, MoE) is resolved on its own; `meant_for` says which part of
a `--prefer`/`--require` value is meant for which family.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

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
from fp4doctor.selection.engine import as_set, engine_auto, family_pick
from fp4doctor.suggest import did_you_mean

REQUIRE_ANY = "any"
REQUIRE_NATIVE = "native"


_WHAT = {FAMILY_LINEAR: "FP4 GEMM", "moe": "FP4 MoE"}


class ResolveError(ValueError):
    """A usage error: an unknown backend name. The message lists the valid ones."""


@dataclass(frozen=True)
class AsSet:
    """What the engine runs one family on as the deployment is set: the backend a knob as set
    selects (an environment variable, a flag on the engine's command line, or the knob a
    --prefer/--require names, which the user will pass), else the engine's own pick (predicted
    by the rules, or asked of the engine). `runs` is False when it cannot run here or has an
    established bug, None when nothing is known of it."""

    backend: str | None
    by: str  # "VLLM_NVFP4_GEMM_BACKEND=flashinfer-cudnn", "vLLM 0.15.1's own pick", ...
    runs: bool | None
    reason: str = ""  # why it cannot run, when it cannot
    engine_pick: bool = False  # the engine's own pick (nothing set selects a backend)

    def to_dict(self) -> dict[str, object]:
        return {"backend": self.backend, "by": self.by, "runs": self.runs,
                "reason": self.reason, "engine_pick": self.engine_pick}  # fmt: skip


@dataclass(frozen=True)
class Resolution:
    """One family as set (`as_set`) and fp4doctor's choice (`chosen`, the best valid path), the
    knob that selects it, and why."""

    chosen: str | None
    knob: Knob | None  # None when the engine's own automatic order picks `chosen` (no preference)
    unset_env: tuple[str, ...] = ()
    ready: bool = False
    notes: tuple[str, ...] = ()  # explanations for stderr
    findings: tuple[Finding, ...] = ()
    as_set: AsSet | None = None

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
    family applies to every family with a backend of that name or alias (a `--require` only to
    the families with a backend of exactly that name, when one has; `native`/`any` to
    all). A name no family knows is a ResolveError listing the valid ones."""
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
            # A bare --require binds the family whose backend it names (`cutlass` is vLLM's
            # CUTLASS linear kernel, not also the MoE family's cutlass-moe); --prefer, a wish,
            # applies wherever the name fits.
            exact = [f for f in known if name.lower() in profile.view(f).backends]
            if what == "--require" and not scope and exact:
                known = exact
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


@dataclass(frozen=True)
class _Wish:
    """What `--prefer`/`--require` ask of one family, read once: the backends each names (best
    first) and what may be chosen at all."""

    prefer: str | None
    require: str | None
    preferred: tuple[str, ...]  # the --prefer family, else the --require one
    required: tuple[str, ...]  # the backends a named --require allows
    allowed: tuple[str, ...]

    @classmethod
    def read(cls, evaluation: Evaluation, prefer: str | None, require: str | None) -> _Wish:
        profile = evaluation.profile
        required: list[str] = []
        if require not in (None, REQUIRE_ANY, REQUIRE_NATIVE):
            required = family(evaluation, str(require), "--require")
        preferred = family(evaluation, prefer, "--prefer") if prefer else required
        allowed = list(profile.backends)
        if required:
            allowed = required
        elif require == REQUIRE_NATIVE:
            allowed = [b for b in allowed if profile.backends[b].native]
        return cls(prefer, require, tuple(preferred), tuple(required), tuple(allowed))

    @property
    def named(self) -> str | None:
        return self.preferred[0] if self.preferred else None


class _Step:
    """One family's resolution as it is worked out: the evaluation asked, and what is said."""

    def __init__(self, evaluation: Evaluation, wish: _Wish) -> None:
        self.evaluation, self.wish = evaluation, wish
        self.label = evaluation.engine_label
        self.notes: list[str] = []
        self.findings: list[Finding] = []

    def usable(self, name: str) -> bool:
        """Valid here, and reachable: a knob selects it, or the engine picks it by itself."""
        e = self.evaluation
        reachable = e.era.selecting_knob(name) is not None or name == engine_auto(e)
        return e.valid(name) and reachable

    def why_not(self, name: str) -> str:
        problems = self.evaluation.verdicts[name].problems()
        if problems:
            return "; ".join(dict.fromkeys(short_reason(p) for p in problems[:3]))
        return f"{self.label} reaches it only through its automatic order, which picks another here"

    def add(self, name: str, status: Status, reason: str, **more: Any) -> None:
        fid = finding_id(self.evaluation.family, name)
        self.findings.append(Finding(fid, status, reason, **more))


def _resolve(
    evaluation: Evaluation, prefer: str | None = None, require: str | None = None
) -> Resolution:
    """Choose the backend and its knobs. `require` (NAME, 'native' or 'any') narrows what may be
    chosen, and a named requirement is also the preference; nothing else chosen is then ready.
    The steps: the wish read once, the named backend, else the engine's order among the valid
    ones, what runs as set, then the findings that say so."""
    step = _Step(evaluation, _Wish.read(evaluation, prefer, require))
    wish = step.wish
    if prefer and wish.required and not any(b in wish.allowed for b in wish.preferred):
        # Both asked for, in different families: the requirement decides, and it is said.
        step.notes.append(
            f"--prefer {prefer} and --require {require} name different backends: "
            f"--require wins, --prefer {prefer} is not used"
        )
    chosen = _named_choice(step)
    if chosen is None:
        chosen = _automatic_choice(step)
    elif chosen != step.wish.named:
        step.notes.append(f"using {chosen}, of the same family as {prefer or require}")
    as_set = _as_set(step, chosen)
    _engine_pick_findings(step, chosen, as_set)
    _choice_findings(step, chosen)
    if chosen is None:
        return Resolution(chosen=None, knob=None, ready=False, notes=tuple(step.notes),
                          findings=tuple(step.findings), as_set=as_set)  # fmt: skip
    # With no preference, the engine's own choice is left to the engine (a knob would narrow
    # it: TensorRT-LLM's allowed list, for one, is profiled per shape).
    pin = step.wish.named is not None or chosen != engine_auto(evaluation)
    return replace(_knobs(evaluation, chosen, pin, step.notes, step.findings), as_set=as_set)


def _named_choice(step: _Step) -> str | None:
    """The first backend the wish names that is usable here."""
    wish = step.wish
    for member in (b for b in wish.preferred if b in wish.allowed):
        if step.usable(member):
            return member
        if wish.prefer:  # with --require alone, its own finding says why
            step.notes.append(f"{member} is not usable here: {step.why_not(member)}")
    return None


def _automatic_choice(step: _Step) -> str | None:
    """The engine's own pick when it is valid here; else the engine's automatic order, then the
    profile's, among the usable backends: one with no known risk first, and a weight-only
    fallback never over a native backend ahead of it for a risk that is not established. Each
    backend passed over is said."""
    evaluation, wish = step.evaluation, step.wish
    profile = evaluation.profile
    own = family_pick(evaluation).backend
    if own is not None and own in wish.allowed and step.usable(own) and wish.named is None:
        # A working setup is never moved off the engine's own valid pick: a risk that is not
        # established is said (its -v rows), not acted on (issue 39's severity policy).
        return own
    order = [*family_pick(evaluation).order, *profile.backends]
    valid = [b for b in dict.fromkeys(order) if b in wish.allowed and step.usable(b)]
    clean = [b for b in valid if not evaluation.verdicts[b].risks()]
    chosen = clean[0] if clean else (valid[0] if valid else None)
    native = [b for b in valid if profile.backends[b].native]
    if chosen is not None and chosen not in native:
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
        step.notes.append(f"passing over {b}: {why}")
    if chosen is not None and wish.named is not None:
        step.notes.append(f"falling back to {chosen}, the best backend that is valid here")
    return chosen


def _as_set(step: _Step, chosen: str | None) -> AsSet | None:
    """What runs as set: a knob as set, the backend --prefer/--require names (the user passes
    its knob), else the engine's own pick."""
    evaluation, label = step.evaluation, step.label
    selection = evaluation.env_selection
    pick = family_pick(evaluation)
    if selection is not None:
        # The knob's value, walked or swapped as the engine does (engine.as_set: a CLI knob
        # that walks its named kernels, a value naming none, the era's modifiers).
        backend = as_set(evaluation)
        if backend is None:
            return AsSet(None, selection.setting, False, f"{label} stops at start-up with it")
        runs = evaluation.valid(backend)
        if runs and chosen != backend and step.usable(backend):
            # A knob as set selects a backend that runs here: not a failure; the choice is
            # advice, and says why it differs.
            risks = evaluation.verdicts[backend].risks()
            step.notes.append(
                f"as set, {selection.setting} makes {label} run {backend}"
                + (f", with {_risk_text(risks[0])}" if risks else "")
                + f"; {chosen} is advised instead"
            )
        return AsSet(backend, selection.setting, runs, "" if runs else step.why_not(backend))
    if chosen is not None and chosen in step.wish.preferred:
        what = "--prefer" if step.wish.prefer else "--require"
        return AsSet(chosen, f"{what} {step.wish.prefer or step.wish.require} (its knob passed)",
                     True)  # fmt: skip
    if pick.backend is not None:
        why = step.why_not(pick.backend) if pick.fails else ""
        return AsSet(pick.backend, f"{label}'s own pick", not pick.fails, why, engine_pick=True)
    return None


def _engine_pick_findings(step: _Step, chosen: str | None, as_set: AsSet | None) -> None:
    """The engine's own pick, when it cannot run here: a failure as set when nothing set selects
    another (`env` steers away), a warning otherwise."""
    evaluation, label = step.evaluation, step.label
    pick = family_pick(evaluation)
    auto = pick.backend
    fix = 'eval "$(fp4doctor env)"' if chosen else None
    decides = as_set is None or as_set.engine_pick  # nothing set selects another backend
    if auto is not None and pick.fails:
        why = step.why_not(auto)
        if decides:
            reason = f"as set, {label} picks {auto} by itself, which cannot run here: {why}"
            step.add("engine_auto", Status.FAIL, reason, fix=fix, backend=auto,
                     kind=Kind.ENGINE_PICK)  # fmt: skip
        else:
            reason = f"{label}, left alone, picks {auto}, which cannot run here: {why}"
            step.add("engine_auto", Status.WARN, reason, backend=auto, kind=Kind.ENGINE_PICK)
    elif (
        auto is None
        and pick.known
        and evaluation.facts.gpus
        and (evaluation.era.auto or not evaluation.era.knobs)
    ):
        # (A library used directly, with no automatic order but a knob, picks nothing by
        # itself: the caller chooses. Not a warning.)
        step.add("engine_auto", Status.FAIL if decides else Status.WARN,
                 f"{label}, left alone, finds no NVFP4 backend on this host and stops at model "
                 "load", fix=fix, kind=Kind.ENGINE_PICK)  # fmt: skip


def _choice_findings(step: _Step, chosen: str | None) -> None:
    """The choice, or why there is none: the requirement unmet, or no backend valid here."""
    evaluation, wish, label = step.evaluation, step.wish, step.label
    if chosen is not None:
        step.add("choice", Status.PASS, f"use {chosen}", backend=chosen, kind=Kind.CHOICE)
    elif wish.required:
        why = "; ".join(f"{b} is not usable here: {step.why_not(b)}" for b in wish.required)
        step.add("require", Status.FAIL, f"--require {wish.require}: {why}",
                 backend=wish.required[0], kind=Kind.REQUIRE)  # fmt: skip
    elif wish.require == REQUIRE_NATIVE:
        natives = ", ".join(f"{b}: {step.why_not(b)}" for b in wish.allowed[:3])
        step.add("require", Status.FAIL,
                 f"--require native: no native FP4 backend is usable here ({natives})",
                 kind=Kind.REQUIRE)  # fmt: skip
    else:
        # A backend that would run here but that this release cannot reach: the fix is a
        # package change (its knob finding says which), not a knob.
        unreachable = [
            p for name in wish.allowed if (p := _only_unreachable(evaluation, name)) is not None
        ]
        but = (
            f"; {unreachable[0].backend} would run, but {label} cannot select it as installed"
            if unreachable
            else ""
        )
        step.add("choice", Status.FAIL,
                 f"no {_WHAT[evaluation.family]} backend that {label} can use is valid on this "
                 f"host{but}", fix=unreachable[0].fix if unreachable else None,
                 kind=Kind.CHOICE)  # fmt: skip


_SYMPTOM_WORDS = {Symptom.CRASH: "crash", Symptom.WRONG_OUTPUT: "wrong output",
                  Symptom.HANG: "hang", Symptom.SLOW: "slowdown"}  # fmt: skip


def short_reason(finding: Finding) -> str:
    """A problem in a few words: a known bug by its symptom and advisory id (`fp4doctor
    advisories` tells the rest), anything else by its reason."""
    if finding.kind is Kind.ADVISORY and finding.advisory:
        what = _SYMPTOM_WORDS[finding.symptom] if finding.symptom else "bug"
        here = finding.details.get("here")
        return f"a known {what} (advisory {finding.advisory})" + (f" with {here}" if here else "")
    return finding.reason


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
    # The variables that steer the choice beside the knobs (the era's modifiers, among what it
    # reads: VLLM_DISABLED_KERNELS, SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16) are written only where
    # the chosen knob needs them, and unset otherwise: one left from an earlier `env` would turn
    # this choice into another kernel.
    modifiers = sorted(era.modifier_variables() - keep)
    notes += [f"unsets {v}: it changes which kernel {label} runs" for v in modifiers if v in env]
    unset += [v for v in (*modifiers, *era.conflicts) if v not in unset and v not in keep]
    return Resolution(
        chosen=chosen,
        knob=knob,
        unset_env=tuple(unset),
        ready=True,
        notes=tuple(notes),
        findings=tuple(findings),
    )
