"""The text known failures print (profiles/signatures.yaml), mapped to their cause.

An entry names what a log line must contain (`match`: literals, or patterns each with a literal
that must be present before the pattern is tried) and what it means: either an advisory of
profiles/advisories.yaml (`advisory:`; its version range, GPUs and fix come from there, and are
checked against the facts) or a class of cause of its own (`diagnosis`, `fix`, and the `checks`
that tell its variants apart). Each entry cites where its text was quoted (`source`).

A pattern may not repeat without bound (no ``*``, ``+`` or ``{n,}``): with the literal guard,
the time to test a line is linear in its length, a megabyte word included.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from fp4doctor.profile.yamlnode import Node, ProfileError, optional, required

SCHEMA = 1
FILE = "signatures.yaml"
_KEYS = ("id", "advisory", "match", "diagnosis", "fix", "checks", "source", "note")
_UNBOUNDED = re.compile(r"(?<!\\)(?:[*+]|\{\d{0,9},\})")


@dataclass(frozen=True)
class Matcher:
    guard: str  # a literal the line must contain
    pattern: re.Pattern[str] | None = None  # tried only when the guard is there

    def search(self, text: str) -> bool:
        if self.guard not in text:
            return False
        return self.pattern is None or self.pattern.search(text) is not None


@dataclass(frozen=True)
class Signature:
    id: str
    matchers: tuple[Matcher, ...]
    source: str
    advisory: str | None = None  # an id of profiles/advisories.yaml
    diagnosis: str | None = None  # the cause (from the advisory when it names one)
    fix: str | None = None
    checks: tuple[str, ...] = ()  # what tells the variants of this class of cause apart
    note: str | None = None

    def matches(self, text: str) -> bool:
        return any(m.search(text) for m in self.matchers)


def parse(text: str, file: str) -> tuple[Signature, ...]:
    """The entries of a signatures file; ProfileError names file, line and key."""
    from fp4doctor.profile.schema import NAME_RE, compose

    root = compose(text, file)
    fields = root.mapping(("schema", "signatures"))
    schema = required(fields, "schema", root)
    if schema.integer() != SCHEMA:
        raise schema.error(f"is {schema.integer()}; this fp4doctor reads schema {SCHEMA}")
    out: list[Signature] = []
    seen: set[str] = set()
    for node in required(fields, "signatures", root).sequence():
        f = node.mapping(_KEYS)
        ident = required(f, "id", node).text()
        if not NAME_RE.match(ident):
            raise f["id"].error("ids are lower-case letters, digits, '-', '_' and '.'")
        if ident in seen:
            raise node.error(f"repeats the id '{ident}'")
        seen.add(ident)
        advisory = optional(f, "advisory", Node.text)
        diagnosis = optional(f, "diagnosis", Node.text)
        if advisory is None and diagnosis is None:
            raise node.error("names an advisory or gives a diagnosis")
        out.append(
            Signature(
                id=ident,
                matchers=tuple(_matcher(m) for m in required(f, "match", node).sequence()),
                source=required(f, "source", node).text(),
                advisory=advisory,
                diagnosis=diagnosis,
                fix=optional(f, "fix", Node.text),
                checks=optional(f, "checks", Node.texts) or (),
                note=optional(f, "note", Node.text),
            )
        )
    return tuple(out)


def _matcher(node: Node) -> Matcher:
    if node.is_scalar():
        literal = node.text()
        if not literal:
            raise node.error("is empty")
        return Matcher(literal)
    f = node.mapping(("guard", "regex"))
    guard = required(f, "guard", node).text()
    regex = required(f, "regex", node).text()
    if not guard:
        raise f["guard"].error("is empty")
    if _UNBOUNDED.search(regex.replace("\\\\", "")):
        raise f["regex"].error(
            "repeats without bound (*, + or {n,}); bound it ({0,200}) so a long line "
            "costs linear time"
        )
    try:
        return Matcher(guard, re.compile(regex))
    except re.error as exc:
        raise f["regex"].error(f"is not a regular expression: {exc}") from None


@functools.cache
def shipped() -> tuple[Signature, ...]:
    """The shipped signatures (profiles/signatures.yaml)."""
    from fp4doctor import cache
    from fp4doctor.profile import _read, builtin_dir

    path = str(builtin_dir() / FILE)
    return cache.cached("signatures", path, lambda: (parse(_read(path), path), []))


def validate(signatures: tuple[Signature, ...], advisory_ids: set[str], file: str) -> None:
    """Every advisory a signature names exists."""
    for s in signatures:
        if s.advisory is not None and s.advisory not in advisory_ids:
            raise ProfileError(f"{file}: signature '{s.id}' names no advisory '{s.advisory}'")


def matching(text: str, signatures: tuple[Signature, ...]) -> list[Signature]:
    """The signatures `text` matches, in the file's order (the most specific first)."""
    return [s for s in signatures if s.matches(text)]
