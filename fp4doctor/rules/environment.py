"""Lint the FP4 knobs already set, the environment's variables and the engine's flags on its
command line: invalid values, ignored or deprecated variables, knobs overridden by precedence,
and knobs that select a backend this host cannot run. What the winning knob selects is what the
engine runs as set."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass

from fp4doctor.findings import Finding, Kind, Status
from fp4doctor.profile.kinds.base import Context, is_true
from fp4doctor.profile.model import KNOB_CLI, KNOB_ENV, Era, Knob, Profile
from fp4doctor.rules.backends import Verdict
from fp4doctor.versions import contains

_finding = functools.partial(Finding, kind=Kind.ENV)


@dataclass(frozen=True)
class Selection:
    """A backend the knobs as set select, and the variable (or the engine's flag) that does it."""

    backend: str
    variable: str
    value: str
    note: str | None = None  # the knob's caveat, e.g. when it applies at all

    @property
    def flag(self) -> bool:
        """Selected by a flag on the engine's command line, not an environment variable."""
        return self.variable.startswith("-")

    @property
    def setting(self) -> str:
        """`VAR=value`, or `--flag value` as the command line has it."""
        return f"{self.variable} {self.value}" if self.flag else f"{self.variable}={self.value}"


def lint(
    profile: Profile, era: Era, ctx: Context, verdicts: Mapping[str, Verdict], engine_label: str
) -> tuple[list[Finding], Selection | None]:
    """Findings for the variables set, and what they select (highest precedence wins)."""
    findings: list[Finding] = []
    selections: list[tuple[int, Selection]] = []
    era_vars = {k.name: (i, k) for i, k in enumerate(era.knobs) if k.kind == KNOB_ENV}
    other_knobs = {
        k.name: k for e in profile.eras if e is not era for k in e.knobs if k.kind == KNOB_ENV
    }
    for name in sorted(ctx.env):
        value = ctx.env[name]
        fid = f"env.{name}"
        if name in era_vars:
            rank, knob = era_vars[name]
            selected = _lint_knob(knob, value, fid, engine_label, findings, _engine_cc(ctx))
            missing = [(n, v) for n, v in knob.also if ctx.env.get(n) != v]
            if selected is not None and missing:
                # vLLM reads VLLM_FLASHINFER_MOE_BACKEND only with VLLM_USE_FLASHINFER_MOE_FP4=1.
                needed = " and ".join(f"{n}={v}" for n, v in missing)
                findings[:] = [f for f in findings if not (f.id == fid and f.status is Status.PASS)]
                findings.append(
                    _finding(
                        f"{fid}.unread",
                        Status.WARN,
                        f"{name}={value} has no effect in {engine_label}: it is read only with "
                        f"{needed}",
                        fix=f"export {needed}, or unset {name}",
                        source=knob.source,
                    )
                )
            elif selected is not None:
                selections.append((rank, Selection(selected, name, value, knob.note)))
        elif name in era.read_variables():
            continue
        elif (removed := _removed(profile, name, ctx)) is not None:
            if not removed:
                continue  # an older release, which still reads it
            findings.append(
                Finding(
                    f"{fid}.removed",
                    Status.FAIL,
                    f"{engine_label} refuses to start while {name} is set: "
                    f"{profile.variables[name].note}",
                    fix=f"unset {name}",
                    kind=Kind.ENV,
                )
            )
        elif name in profile.variables or name in other_knobs:
            note = (
                profile.variables[name].note
                if name in profile.variables
                else ("it belongs to another version of the engine")
            )
            meant = _meant_backend(name, value, other_knobs.get(name), profile, _engine_cc(ctx))
            fix = f"unset {name}"
            verdict = verdicts.get(meant) if meant is not None else None
            if meant is not None and verdict is not None and not verdict.valid:
                # Never translate it into a backend the same report refuses here.
                problem = verdict.first_problem()
                why = f": {problem.reason}" if problem else ""
                fix += f"; the {meant} it meant cannot run here{why}"
            elif meant is not None:
                works = era.selecting_knob(meant)
                fix += "; " + (
                    f"use {works.how(meant)}"
                    if works
                    else f"{engine_label} has no knob for {meant}"
                )
            findings.append(
                _finding(fid, Status.WARN, f"{engine_label} ignores {name}: {note}", fix=fix)
            )
    for rank, knob in enumerate(era.knobs):
        if knob.kind != KNOB_CLI or knob.name not in ctx.args:
            continue
        value = ctx.args[knob.name]
        selected = _lint_knob(knob, value, f"args.{knob.name.lstrip('-')}", engine_label, findings)
        if selected is not None:
            selections.append((rank, Selection(selected, knob.name, value, knob.note)))
    selections.sort(key=lambda s: s[0])
    if not selections:
        return findings, None
    winner = selections[0][1]
    winning_knob = next(k for k in era.knobs if k.name == winner.variable)
    companions = {n for n, _ in winning_knob.also}
    for _, loser in selections[1:]:
        if loser.variable in companions:  # set with the winner so that it is read at all
            continue
        findings.append(
            _finding(
                f"{_fid(loser)}.overridden",
                Status.WARN,
                f"{loser.setting} has no effect: {winner.setting} takes precedence in "
                f"{engine_label}" + (f" ({winner.note})" if winner.note else ""),
                fix=_drop(loser) if loser.backend != winner.backend else None,
            )
        )
    verdict = verdicts.get(winner.backend)
    if verdict is not None and not verdict.valid:
        problem = verdict.first_problem()
        findings.append(
            _finding(
                f"{_fid(winner)}.backend",
                Status.FAIL,
                f"{winner.setting} makes {engine_label} use {winner.backend}, which cannot run "
                f"here: {problem.reason if problem else 'see its findings'}",
                fix=f'{_drop(winner)}, or run: eval "$(fp4doctor env)"',
                backend=winner.backend,
            )
        )
    return findings, winner


def _fid(selection: Selection) -> str:
    """`env.VLLM_NVFP4_GEMM_BACKEND`, or `args.linear-backend` for a flag."""
    name = selection.variable
    return f"args.{name.lstrip('-')}" if selection.flag else f"env.{name}"


def _corrected(knob: Knob, value: str | None) -> str:
    """The fix for an invalid value: the close choice, else the knob taken away."""
    if knob.kind == KNOB_CLI:
        return f"pass {knob.name} {value}" if value else f"drop {knob.name}"
    return f"export {knob.name}={value}" if value else f"unset {knob.name}"


def _drop(selection: Selection) -> str:
    """How to take a knob as set away."""
    if selection.flag:
        return f"drop {selection.setting} from the engine's command line"
    return f"unset {selection.variable}"


def _engine_cc(ctx: Context) -> int | None:
    """The compute capability the engine decides a GPU-dependent knob on: its first GPU's
    (vLLM's current_platform.get_device_capability() asks device 0)."""
    return ctx.gpus[0].cc if ctx.gpus else None


def _lint_knob(
    knob: Knob,
    value: str,
    fid: str,
    engine_label: str,
    findings: list[Finding],
    cc: int | None = None,
) -> str | None:
    """Check one set variable of this era; return the backend it selects, if any."""
    if knob.type == "bool":
        if knob.bool_style == "int":
            try:
                on = int(value) != 0
            except ValueError:
                findings.append(
                    _finding(
                        fid,
                        Status.FAIL,
                        f"{knob.name}={value!r} is not a number: "
                        + (knob.on_invalid or f"{engine_label} rejects it at start-up"),
                        fix=f"export {knob.name}=0  # or 1, or unset it",
                        source=knob.source,
                    )
                )
                return None
        else:
            on = is_true(value)
        selected = knob.backend_when_on(cc) if on else None
    else:
        selected = knob.backend_for(value, cc)
        if selected is None:
            accepted = knob.accepted()
            close = difflib.get_close_matches(value, accepted, n=1) or [
                a for a in accepted if a.lower() == value.lower()
            ]
            hint = f" Did you mean {close[0]!r}?" if close else ""
            findings.append(
                _finding(
                    fid,
                    Status.FAIL,
                    f"{knob.name}={value!r} is not a valid choice for {engine_label} "
                    f"(valid: {', '.join(accepted)}): "
                    + (knob.on_invalid or "the engine rejects it")
                    + "."
                    + hint,
                    fix=_corrected(knob, close[0] if close else None),
                    source=knob.source,
                )
            )
            return None
    if knob.deprecated:
        findings.append(
            _finding(f"{fid}.deprecated", Status.WARN, knob.deprecated, source=knob.source)
        )
    if selected is not None:
        note = f" ({knob.note})" if knob.note else ""
        findings.append(
            _finding(
                fid,
                Status.PASS,
                f"{knob.name}={value} selects {selected}{note}",
                backend=selected,
                source=knob.source,
            )
        )
    return selected


def _removed(profile: Profile, name: str, ctx: Context) -> bool | None:
    """Whether the engine version judged raises at start-up when `name` is set (False: a
    version that still reads it); None when the profile names no removal for it."""
    variable = profile.variables.get(name)
    if variable is None or variable.removed is None or ctx.engine is None:
        return None
    return bool(contains(variable.removed, ctx.engine[1]))


def _meant_backend(
    name: str, value: str, knob: Knob | None, profile: Profile, cc: int | None = None
) -> str | None:
    """Which backend a user meant by a variable this version ignores."""
    if knob is not None:
        if not knob.select:  # a switch with side effects: never advised as a backend knob
            return None
        if knob.type == "bool":
            return knob.backend_when_on(cc) if is_true(value) else None
        return knob.backend_for(value, cc)
    variable = profile.variables.get(name)
    if variable is not None and variable.means and is_true(value):
        return variable.means
    return None
