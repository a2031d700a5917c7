"""What an engine upgrade changes for this host: `fp4doctor diff --from 0.33.0 --to 0.34.0`.

The same question (host facts, model, preferences) is diagnosed at both releases; per FP4 GEMM
family the two answers are compared: the knobs of the era (added, removed, renamed, with other
values, deprecated, now an error), the backends the engine can reach (added, gone) and those
valid here, the engine's own pick, the choice, and the known problems (advisories) fixed and
introduced. Across families: the `env` lines to change, and the model's and the environment's
findings fixed and introduced.

"Changes here" means something this host uses: the pick or the choice, a backend valid here, a
knob the choice writes or the environment sets, a known problem on a backend picked or chosen,
an `env` line, a finding of the model or the environment. `fp4doctor diff` exits 0 when nothing
here changes and 1 otherwise (3 when either release cannot be judged). Pure over two reports:
`compare(before, after)`; `upgrade(question, old, new)` asks the doctor for both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fp4doctor.findings import Finding, Kind, Status
from fp4doctor.profile.model import Era, Knob, Profile
from fp4doctor.selection.engine import engine_auto
from fp4doctor.versions import contains

if TYPE_CHECKING:
    from fp4doctor.doctor import FamilyPart, Question, Report

DIFF_SCHEMA_VERSION = 1  # the schema: fp4doctor/schemas/diff-v1.schema.json
EXIT_UNCHANGED, EXIT_CHANGED, EXIT_NO_VERDICT = 0, 1, 3


@dataclass(frozen=True)
class Delta:
    """What one side has and the other lacks, by stable name (finding id, knob, backend)."""

    gone: tuple[str, ...] = ()
    added: tuple[str, ...] = ()

    @staticmethod
    def of(before: Iterable[str], after: Iterable[str]) -> Delta:
        b, a = list(dict.fromkeys(before)), list(dict.fromkeys(after))
        return Delta(tuple(x for x in b if x not in a), tuple(x for x in a if x not in b))

    def __bool__(self) -> bool:
        return bool(self.gone or self.added)


@dataclass(frozen=True)
class KnobChanges:
    """The era's knobs at both releases."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()  # (old, new): the new one selects the same backends
    values: tuple[tuple[str, Delta], ...] = ()  # a knob kept, with backends it selects gone/added
    deprecated: tuple[str, ...] = ()  # deprecated at the new release, not at the old
    now_errors: tuple[str, ...] = ()  # variables the new release refuses to start with

    def names(self) -> set[str]:
        """Every knob or variable named here (to ask whether this host uses one)."""
        out = {*self.added, *self.removed, *self.deprecated, *self.now_errors}
        out |= {n for pair in self.renamed for n in pair}
        return out | {n for n, _ in self.values}

    def __bool__(self) -> bool:
        return bool(self.names())

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "renamed": [{"from": a, "to": b} for a, b in self.renamed],
            "values": {n: {"gone": list(d.gone), "added": list(d.added)} for n, d in self.values},
            "deprecated": list(self.deprecated),
            "now_errors": list(self.now_errors),
        }


@dataclass(frozen=True)
class FamilyChanges:
    """One FP4 GEMM family across the upgrade."""

    family: str
    knobs: KnobChanges
    backends: Delta  # backends the engine can reach (automatic order or a knob)
    valid_here: Delta  # backends valid on this host
    engine_pick: tuple[str | None, str | None]
    choice: tuple[str | None, str | None]
    advisories_fixed: tuple[Finding, ...] = ()
    advisories_introduced: tuple[Finding, ...] = ()
    uses: frozenset[str] = field(default_factory=frozenset)  # what this host uses (see module)
    verified: tuple[bool, bool] = (True, True)

    @property
    def changes_here(self) -> bool:
        moved = self.engine_pick[0] != self.engine_pick[1] or self.choice[0] != self.choice[1]
        advisories = self.advisories_fixed + self.advisories_introduced
        valid = {*self.valid_here.gone, *self.valid_here.added}
        return (
            moved
            or bool(valid & self.uses)
            or bool(self.knobs.names() & self.uses)
            or any(f.backend in self.uses for f in advisories)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "knobs": self.knobs.to_dict(),
            "backends": {"gone": list(self.backends.gone), "added": list(self.backends.added)},
            "valid_here": {
                "gone": list(self.valid_here.gone),
                "added": list(self.valid_here.added),
            },
            "engine_pick": {"before": self.engine_pick[0], "after": self.engine_pick[1]},
            "choice": {"before": self.choice[0], "after": self.choice[1]},
            "advisories": {
                "fixed": [_finding(f) for f in self.advisories_fixed],
                "introduced": [_finding(f) for f in self.advisories_introduced],
            },
            "verified": {"before": self.verified[0], "after": self.verified[1]},
            "changes_here": self.changes_here,
        }


@dataclass(frozen=True)
class Upgrade:
    """Everything an upgrade from one engine release to another changes for this host."""

    target: str
    title: str
    versions: tuple[str, str]
    families: tuple[FamilyChanges, ...]
    env_lines: Delta  # `fp4doctor env` (bash) lines: gone = remove, added = add
    set_here: frozenset[str] = frozenset()  # the variables set in the host's environment
    findings_fixed: tuple[Finding, ...] = ()  # the model's and the environment's
    findings_introduced: tuple[Finding, ...] = ()
    no_verdict: tuple[str, ...] = ()  # the releases that cannot be judged here

    @property
    def changes_here(self) -> bool:
        return (
            any(f.changes_here for f in self.families)
            or any(self._matters(line) for line in (*self.env_lines.gone, *self.env_lines.added))
            or bool(self.findings_fixed or self.findings_introduced)
        )

    def _matters(self, line: str) -> bool:
        """An `env` line that changes this host's environment: any export, and the unset of a
        variable that is set here (unsetting what is not set changes nothing)."""
        if not line.startswith("unset "):
            return True
        return line.split()[-1] in self.set_here

    @property
    def exit_code(self) -> int:
        if self.no_verdict:
            return EXIT_NO_VERDICT
        return EXIT_CHANGED if self.changes_here else EXIT_UNCHANGED

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (fp4doctor/schemas/diff-v1.schema.json)."""
        return {
            "schema_version": DIFF_SCHEMA_VERSION,
            "target": self.target,
            "from": self.versions[0],
            "to": self.versions[1],
            "families": {f.family: f.to_dict() for f in self.families},
            "env": {"remove": list(self.env_lines.gone), "add": list(self.env_lines.added)},
            "findings": {
                "fixed": [_finding(f) for f in self.findings_fixed],
                "introduced": [_finding(f) for f in self.findings_introduced],
            },
            "no_verdict": list(self.no_verdict),
            "changes_here": self.changes_here,
            "exit_code": self.exit_code,
        }

    def text(self) -> str:
        """The comparison for people, one family after another."""
        old, new = self.versions
        out = [f"{self.title} {old} -> {new} on this host"]
        for v in self.no_verdict:
            out.append(f"  {self.title} {v} cannot be judged here (see `fp4doctor check`)")
        for fam in self.families:
            out.append("")
            out.append(f"{fam.family}:" + ("" if fam.changes_here else " nothing this host uses"))
            k = fam.knobs
            out += [f"  knob added: {n}" for n in k.added]
            out += [f"  knob removed: {n}" for n in k.removed]
            out += [f"  knob renamed: {a} -> {b}" for a, b in k.renamed]
            for name, d in k.values:
                out += [f"  {name}: no longer selects {b}" for b in d.gone]
                out += [f"  {name}: now selects {b}" for b in d.added]
            out += [f"  knob deprecated: {n}" for n in k.deprecated]
            out += [f"  now an error when set: {n}" for n in k.now_errors]
            out += [f"  backend gone: {b}" for b in fam.backends.gone]
            out += [f"  backend added: {b}" for b in fam.backends.added]
            out += [f"  no longer valid here: {b}" for b in fam.valid_here.gone]
            out += [f"  now valid here: {b}" for b in fam.valid_here.added]
            for what, (a, b) in (("engine's own pick", fam.engine_pick), ("choice", fam.choice)):
                out.append(f"  {what}: {a} -> {b}" if a != b else f"  {what}: {a} (unchanged)")
            out += [f"  fixed: {f.reason}" for f in fam.advisories_fixed]
            out += [f"  introduced: {f.reason}" for f in fam.advisories_introduced]
            if not fam.verified[1]:
                out.append(f"  {self.title} {new}: unverified (newer than the release data)")
        if self.env_lines:
            out.append("")
            out.append("env (bash):")
            out += [f"  - {line}" for line in self.env_lines.gone]
            out += [f"  + {line}" for line in self.env_lines.added]
        if self.findings_fixed or self.findings_introduced:
            out.append("")
            out += [f"fixed: {f.reason}" for f in self.findings_fixed]
            out += [f"introduced: {f.reason}" for f in self.findings_introduced]
        out.append("")
        out.append(
            "CHANGES for this host." if self.changes_here else "Nothing this host uses changes."
        )
        return "\n".join(out) + "\n"


def upgrade(question: Question, old: str, new: str) -> Upgrade:
    """Diagnose `question` at engine releases `old` and `new` (no live GEMMs) and compare."""
    from fp4doctor.doctor import diagnose

    ask = replace(question, smoke=False, force=False)
    before = diagnose(replace(ask, engine_version=old))
    after = diagnose(replace(ask, engine_version=new))
    return compare(before, after)


def compare(before: Report, after: Report) -> Upgrade:
    """What changes from `before` to `after`: the same question at two engine releases."""
    from fp4doctor.doctor import Outcome

    old, new = before.engine.version, after.engine.version
    profile = after.profile
    no_verdict = tuple(r.engine.version for r in (before, after) if r.outcome is Outcome.NO_VERDICT)
    olds = {p.family: p for p in before.families}
    families = tuple(_family(olds[p.family], p) for p in after.families if p.family in olds)
    return Upgrade(
        target=profile.target,
        title=profile.title,
        versions=(old, new),
        families=families,
        env_lines=Delta.of(_env_lines(before), _env_lines(after)),
        set_here=frozenset(after.families[0].evaluation.context.env),
        findings_fixed=_problems(before, after),
        findings_introduced=_problems(after, before),
        no_verdict=no_verdict,
    )


def _family(before: FamilyPart, after: FamilyPart) -> FamilyChanges:
    b, a = before.evaluation, after.evaluation
    chosen = {n for n in (before.resolution.chosen, after.resolution.chosen) if n is not None}
    picked = {n for n in (engine_auto(b), engine_auto(a)) if n is not None}
    knobs_used = {k.knob.name for k in (before.resolution, after.resolution) if k.knob}
    set_here = set(a.context.env)
    advisories_b, advisories_a = _advisories(b.all_findings()), _advisories(a.all_findings())
    return FamilyChanges(
        family=after.family,
        knobs=_knobs(b.era, a.era, a.profile, b.engine.version, a.engine.version),
        backends=Delta.of(_reachable(b.era), _reachable(a.era)),
        valid_here=Delta.of(
            [n for n in b.verdicts if b.valid(n)], [n for n in a.verdicts if a.valid(n)]
        ),
        engine_pick=(engine_auto(b), engine_auto(a)),
        choice=(before.resolution.chosen, after.resolution.chosen),
        advisories_fixed=tuple(f for i, f in advisories_b.items() if i not in advisories_a),
        advisories_introduced=tuple(f for i, f in advisories_a.items() if i not in advisories_b),
        uses=frozenset({*chosen, *picked, *knobs_used, *set_here}),
        verified=(b.verified, a.verified),
    )


def _knobs(old: Era, new: Era, profile: Profile, v_old: str, v_new: str) -> KnobChanges:
    b = {k.name: k for k in old.knobs}
    a = {k.name: k for k in new.knobs}
    removed = [n for n in b if n not in a]
    added = [n for n in a if n not in b]
    renamed = []
    for gone in list(removed):
        heir = next((n for n in added if _same_backends(b[gone], a[n])), None)
        if heir is not None:
            renamed.append((gone, heir))
    # A knob renamed is said once, as renamed: not also as removed and added.
    removed = [n for n in removed if n not in {old for old, _ in renamed}]
    added = [n for n in added if n not in {new for _, new in renamed}]
    values = tuple((n, d) for n in b if n in a and (d := Delta.of(b[n].values, a[n].values)))
    deprecated = tuple(n for n in a if a[n].deprecated and n in b and not b[n].deprecated)
    now_errors = tuple(
        name
        for name, variable in profile.variables.items()
        if variable.removed is not None
        and contains(variable.removed, v_new)
        and not contains(variable.removed, v_old)
    )
    return KnobChanges(
        added=tuple(added),
        removed=tuple(removed),
        renamed=tuple(renamed),
        values=values,
        deprecated=deprecated,
        now_errors=now_errors,
    )


def _same_backends(old: Knob, new: Knob) -> bool:
    """A knob gone and one come that select the same backends (at least half of the old's):
    the same choice under a new name (VLLM_NVFP4_GEMM_BACKEND -> --linear-backend in 0.24)."""
    if not (old.select and new.select):
        return False
    shared = set(old.values) & set(new.values)
    return len(shared) * 2 >= len(old.values) > 0


def _reachable(era: Era) -> list[str]:
    """The backends the engine can run in an era: its automatic order and its knobs' values."""
    found = [s.backend for s in era.auto]
    found += [b for k in era.knobs if k.select for b in k.values]
    return list(dict.fromkeys(found))


def _advisories(findings: Iterable[Finding]) -> dict[str, Finding]:
    """The known problems that hold here (an advisory finding not passed), by id."""
    return {
        f.id: f
        for f in findings
        if f.kind is Kind.ADVISORY and f.status not in (Status.PASS, Status.SKIP)
    }


def _problems(some: Report, other: Report) -> tuple[Finding, ...]:
    """The model's, the environment's and the engine's own problems (its start-up needs, a
    release past the data, an install the index cannot do) in `some` that `other` lacks."""

    def problems(r: Report) -> dict[str, Finding]:
        found = [f for f in r.host if f.kind is Kind.ENGINE]
        found += [f for p in r.families for f in p.evaluation.env_findings]
        found += list(r.model.findings) if r.model is not None else []
        return {f.id: f for f in found if f.status not in (Status.PASS, Status.SKIP)}

    theirs = problems(other)
    return tuple(f for i, f in problems(some).items() if i not in theirs)


def _env_lines(report: Report) -> list[str]:
    """What `fp4doctor env` (bash) prints at this release."""
    from fp4doctor.emit import emit
    from fp4doctor.emit.knobs import exports_for, settings

    resolutions = [p.resolution for p in report.families]
    if not all(r.chosen for r in resolutions):
        return []
    exports, _ = exports_for(report.profile, settings(resolutions), report.engine_label)
    return emit("bash", exports).splitlines()


def _finding(f: Finding) -> dict[str, Any]:
    return {"id": f.id, "backend": f.backend, "status": f.status.value, "reason": f.reason}
