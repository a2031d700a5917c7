"""The maintained data set of known problems (profiles/advisories.yaml): one entry per bug with a
version boundary, attached to the backends it names in every profile that has them.

An entry becomes an `Advisory` whose conditions are ordinary requirements (the bad package's
versions, the compute capabilities, the extra `when` packages), so the rules judge it like any
other rule. Each entry judges the backends of its own family (dense linear or MoE).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet

from fp4doctor.profile import triggers
from fp4doctor.profile.kinds.base import Requirement
from fp4doctor.profile.kinds.compute_capability import ComputeCapability
from fp4doctor.profile.kinds.cuda_runtime import CudaRuntime
from fp4doctor.profile.kinds.package import Package
from fp4doctor.profile.model import SYMPTOMS, Advisory, Backend, Profile
from fp4doctor.profile.yamlnode import Node, ProfileError, optional, required

SCHEMA = 1
FAMILIES = ("linear", "moe")
FAMILY_LINEAR = "linear"
_KEYS = (
    "id",
    "family",
    "effect",
    "package",
    "versions",
    "compute_capability",
    "cuda_runtime",
    "backends",
    "targets",
    "when",
    "trigger",
    "shapes",
    "reason",
    "fixed_in",
    "workaround",
    "alternatives",
    "source",
    "fix_source",
    "verified",
)


@dataclass(frozen=True)
class KnownIssue:
    """One entry of the data set, as written."""

    id: str
    family: str
    effect: str
    package: str
    versions: SpecifierSet
    backends: tuple[str, ...]
    reason: str
    source: str
    compute_capability: tuple[int, ...] = ()
    cuda_runtime: SpecifierSet | None = None  # torch's CUDA build, where only some are affected
    targets: tuple[str, ...] = ()  # empty: every target that has one of the backends
    when: tuple[tuple[str, SpecifierSet], ...] = ()
    trigger: triggers.Trigger = field(default_factory=triggers.Trigger)  # --ep, --model, ...
    shapes: str | None = None
    fixed_in: str | None = None
    workaround: str | None = None
    alternatives: tuple[str, ...] = ()  # backends to use instead, named where they run here
    fix_source: str | None = None
    line: int = 0

    def applies_to(self, target: str) -> bool:
        return not self.targets or target in self.targets

    def conditions(self) -> tuple[Requirement, ...]:
        """The requirements that all hold on an affected host."""
        conds = [Requirement(Package(self.package, self.versions), id="package", line=self.line)]
        if self.compute_capability:
            cc = ComputeCapability(exact=self.compute_capability)
            conds.append(Requirement(cc, id="compute_capability", line=self.line))
        if self.cuda_runtime is not None:
            runtime = CudaRuntime(self.cuda_runtime)
            conds.append(Requirement(runtime, id="cuda_runtime", line=self.line))
        for dist, spec in self.when:
            conds.append(Requirement(Package(dist, spec), id=dist, line=self.line))
        return tuple(conds)

    def advisory(self, alternatives: tuple[str, ...] = ()) -> Advisory:
        fix = self.workaround
        if self.fixed_in and not fix:
            fix = f"pip install -U '{self.package}>={self.fixed_in}'"
        reason = self.reason + (f" (when: {self.shapes})" if self.shapes else "")
        return Advisory(
            id=self.id,
            conditions=self.conditions(),
            reason=reason,
            fix=fix,
            source=self.source,
            effect=self.effect,
            shapes=self.shapes,
            fixed_in=self.fixed_in,
            trigger=self.trigger,
            alternatives=alternatives,
        )


def parse(text: str, file: str) -> tuple[KnownIssue, ...]:
    """The data set's entries; ProfileError names file, line and key for a malformed one."""
    from fp4doctor.profile.schema import compose  # the parser: only to parse (fp4doctor/cache.py)

    root = compose(text, file)
    fields = root.mapping(("schema", "advisories"))
    schema = required(fields, "schema", root)
    if schema.integer() != SCHEMA:
        raise schema.error(f"is {schema.integer()}; this fp4doctor reads schema {SCHEMA}")
    out: list[KnownIssue] = []
    seen: set[str] = set()
    for node in required(fields, "advisories", root).sequence():
        issue = _issue(node)
        if issue.id in seen:
            raise node.error(f"repeats the id '{issue.id}'")
        seen.add(issue.id)
        out.append(issue)
    return tuple(out)


def _issue(node: Node) -> KnownIssue:
    from fp4doctor.profile.schema import NAME_RE

    f = node.mapping(_KEYS)
    ident = required(f, "id", node).text()
    if not NAME_RE.match(ident):
        raise f["id"].error("ids are lower-case letters, digits, '-', '_' and '.'")
    when: tuple[tuple[str, SpecifierSet], ...] = ()
    if "when" in f:
        when = tuple((k, v.specifier()) for k, v in f["when"].mapping().items())
    ccs = (
        tuple(n.integer() for n in f["compute_capability"].sequence())
        if "compute_capability" in f
        else ()
    )
    return KnownIssue(
        id=ident,
        family=required(f, "family", node).choice(FAMILIES),
        effect=required(f, "effect", node).choice(SYMPTOMS),
        package=required(f, "package", node).text(),
        versions=required(f, "versions", node).specifier(),
        backends=required(f, "backends", node).texts(),
        reason=required(f, "reason", node).text(),
        source=required(f, "source", node).text(),
        compute_capability=ccs,
        cuda_runtime=optional(f, "cuda_runtime", Node.specifier),
        targets=optional(f, "targets", Node.texts) or (),
        when=when,
        trigger=optional(f, "trigger", triggers.parse) or triggers.Trigger(),
        shapes=optional(f, "shapes", _text_or_null),
        fixed_in=optional(f, "fixed_in", _text_or_null),
        workaround=optional(f, "workaround", _text_or_null),
        alternatives=optional(f, "alternatives", Node.texts) or (),
        fix_source=optional(f, "fix_source", _text_or_null),
        line=node.line,
    )


def _text_or_null(node: Node) -> str | None:
    """Text, or null for "not known" (a fix not released yet, a fixing PR not found)."""
    return None if node.scalar() is None else node.text()


def attach(prof: Profile, issues: tuple[KnownIssue, ...]) -> Profile:
    """`prof` with each issue added to the advisories of the backends it names, in its family:
    a MoE issue naming `flashinfer-trtllm` goes to the MoE backend of that name, alias or
    `-moe` name (`flashinfer-trtllm-moe`), never to the linear one."""
    backends = dict(prof.backends)
    for issue in issues:
        if not issue.applies_to(prof.target):
            continue
        family = [b for b in backends.values() if b.family == issue.family]

        def named(b: Backend, name: str) -> bool:
            return b.name in (name, f"{name}-{b.family}") or name in b.aliases

        alternatives = tuple(b.name for n in issue.alternatives for b in family if named(b, n))
        for name in issue.backends:
            for key, b in backends.items():
                if b.family == issue.family and named(b, name):
                    backends[key] = dataclasses.replace(
                        b, advisories=(*b.advisories, issue.advisory(alternatives))
                    )
    if backends == prof.backends:
        return prof
    return dataclasses.replace(prof, backends=backends)


def validate(issues: tuple[KnownIssue, ...], known_backends: set[str], file: str) -> None:
    """Every backend an entry names exists in some shipped profile (a typo attaches nowhere)."""
    for issue in issues:
        for name in issue.backends:
            if name not in known_backends:
                raise ProfileError(
                    f"{file}:{issue.line}: advisory '{issue.id}' names no backend of any "
                    f"profile: {name!r} (valid: {', '.join(sorted(known_backends))})"
                )
