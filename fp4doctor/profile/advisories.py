"""The maintained data set of known problems (profiles/advisories.yaml): one entry per bug with a
version boundary, attached to the backends it names in every profile that has them.

An entry becomes an `Advisory` whose conditions are ordinary requirements (the bad package's
versions, the compute capabilities, the extra `when` packages), so the rules judge it like any
other rule. Each entry judges the backends of its own family (dense linear or MoE).

Every entry also says how far its source was read (`evidence`, which the severity policy in
`rules/severity.py` weighs), where the bug starts (a lower bound in `versions`, or
`no_lower_bound` with the reason none was found) and under what its mechanism strikes
(`trigger`, or `trigger: {always: "<why>"}` for a bug that needs nothing else).
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
    "evidence",
    "no_lower_bound",
)
# How far the source of an entry was read: a thread that shows the failure with versions, the
# fix's diff that shows the bug, or only a commit message or title (never blocks).
EVIDENCE_REPRODUCED = "reproduced"
EVIDENCE_FIX_DIFF = "fix-diff"
EVIDENCE_COMMIT_MESSAGE = "commit-message"
EVIDENCE = (EVIDENCE_REPRODUCED, EVIDENCE_FIX_DIFF, EVIDENCE_COMMIT_MESSAGE)
_LOWER = (">", ">=", "==", "~=", "===")  # specifier operators that bound a range from below


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
    evidence: str = EVIDENCE_COMMIT_MESSAGE
    no_lower_bound: str | None = None  # why `versions` has no lower bound, when it has none
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
            evidence=self.evidence,
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
    family = required(f, "family", node).choice(FAMILIES)
    effect = required(f, "effect", node).choice(SYMPTOMS)
    package = required(f, "package", node).text()
    versions_node = required(f, "versions", node)
    versions = versions_node.specifier()
    no_lower_bound = optional(f, "no_lower_bound", Node.text)
    bounded = any(s.operator in _LOWER for s in versions)
    if not bounded and not no_lower_bound:
        raise versions_node.error(
            f"{str(versions)!r} has no lower bound: give the first affected release "
            "(>=X), or say why none is known in `no_lower_bound`"
        )
    if bounded and no_lower_bound is not None:
        raise f["no_lower_bound"].error("contradicts `versions`, which has a lower bound")
    if "trigger" not in f:
        raise node.error(
            "is missing the required key 'trigger': the conditions its mechanism needs, "
            'or `{always: "<why>"}` when it strikes on every run'
        )
    return KnownIssue(
        id=ident,
        family=family,
        effect=effect,
        package=package,
        versions=versions,
        backends=required(f, "backends", node).texts(),
        reason=required(f, "reason", node).text(),
        source=required(f, "source", node).text(),
        evidence=required(f, "evidence", node).choice(EVIDENCE),
        no_lower_bound=no_lower_bound,
        compute_capability=ccs,
        cuda_runtime=optional(f, "cuda_runtime", Node.specifier),
        targets=optional(f, "targets", Node.texts) or (),
        when=when,
        trigger=triggers.parse(f["trigger"]),
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
