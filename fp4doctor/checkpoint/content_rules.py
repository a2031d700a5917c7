"""What each engine release does with a checkpoint's content defect: `profiles/shapes.yaml`
`content`, as typed data.

An entry names a defect kind (fp4doctor/checkpoint/content.py KINDS, or `weight_only_groups`: a
ModelOpt `quant_algo: NVFP4` config whose groups quantise weights only), optionally the tensors
and the family it is about, the engine release range, and the effect:

- `load-error`: the engine raises while loading (blocking);
- `wrong-output`: it loads and runs garbage: uninitialised memory, a zero or infinite scale,
  NaN (blocking);
- `picks-one`: it runs with one of the values (the gate's scale for both halves, the largest),
  with a logged warning in some releases (accuracy; a warning);
- `default`: it runs with a default in place of the missing value (accuracy; a warning);
- `reads`: it handles the checkpoint as it is (no finding).

`scheme` (for `weight_only_groups`): the layer class the engine runs such layers as (W4A4 or
W4A16), which decides the kernels it may pick. `target: any` is for a rule that holds of every
engine because it is arithmetic (0 x a scale, 1 / 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet

from fp4doctor.checkpoint.content import KINDS
from fp4doctor.checkpoint.layers import FAMILY_LINEAR, FAMILY_MOE, SCHEME_W4A4, SCHEME_W4A16
from fp4doctor.checkpoint.quant import FORMATS
from fp4doctor.profile.yamlnode import Node, optional, required
from fp4doctor.versions import contains

WEIGHT_ONLY_GROUPS = "weight_only_groups"
DEFECTS = (*KINDS, WEIGHT_ONLY_GROUPS)
EFFECTS = ("load-error", "wrong-output", "picks-one", "default", "reads")
BLOCKING = frozenset({"load-error", "wrong-output"})
ANY = "any"


@dataclass(frozen=True)
class ContentRule:
    """What one engine's releases do with one kind of content defect."""

    id: str
    target: str  # an engine, or ANY
    engine: SpecifierSet
    defect: str
    effect: str
    says: str  # what the engine does, in its own words where it has some
    source: str
    fix: str | None = None
    tensors: tuple[str, ...] = ()  # empty: any tensor
    formats: tuple[str, ...] = ()  # the checkpoint formats it is for (empty: every one)
    family: str | None = None  # None: both families
    scheme: str | None = None  # weight_only_groups: the layer class the engine runs
    unverified: str | None = None

    @property
    def blocking(self) -> bool:
        return self.effect in BLOCKING

    @property
    def cited(self) -> str:
        return self.source + (f" (unverified: {self.unverified})" if self.unverified else "")

    def applies(
        self, target: str, version: str, defect: str, tensors: Sequence[str], family: str, fmt: str
    ) -> bool:
        return (
            self.target in (target, ANY)
            and self.defect == defect
            and (not self.formats or fmt in self.formats)
            and (self.family is None or self.family == family)
            and (not self.tensors or any(t in self.tensors for t in tensors))
            and (self.target == ANY or contains(self.engine, version) is True)
        )


def pick(
    rules: Sequence[ContentRule],
    target: str,
    version: str,
    defect: str,
    tensors: Sequence[str] = (),
    family: str = "",
    fmt: str = "",
) -> ContentRule | None:
    """The rule for this engine release and defect: the engine's own before a rule of ANY, the
    one naming the tensor, family or format before a general one; among equals, the most severe
    (a load error over garbage over a warning)."""
    hits = [r for r in rules if r.applies(target, version, defect, tensors, family, fmt)]
    if not hits:
        return None
    order = {e: i for i, e in enumerate(EFFECTS)}
    return min(
        hits,
        key=lambda r: (
            r.target == ANY,
            not r.tensors,
            r.family is None,
            not r.formats,
            order[r.effect],
        ),
    )


def parse(node: Node) -> ContentRule:
    known = ("id", "target", "engine", "defect", "effect", "says", "source", "fix", "tensors",
             "formats", "family", "scheme", "unverified")  # fmt: skip
    f = node.mapping(known)
    target = required(f, "target", node).text()
    engine = optional(f, "engine", Node.specifier)
    if engine is None and target != ANY:
        raise node.error("'engine' is required (a release range) unless target is 'any'")
    defect = required(f, "defect", node).choice(DEFECTS)
    scheme = optional(f, "scheme", lambda n: n.choice((SCHEME_W4A4, SCHEME_W4A16)))
    if (scheme is not None) != (defect == WEIGHT_ONLY_GROUPS):
        raise node.error(f"'scheme' is given for, and only for, defect {WEIGHT_ONLY_GROUPS}")
    return ContentRule(
        id=required(f, "id", node).text(),
        target=target,
        engine=engine or SpecifierSet(),
        defect=defect,
        effect=required(f, "effect", node).choice(EFFECTS),
        says=required(f, "says", node).text(),
        source=required(f, "source", node).text(),
        fix=optional(f, "fix", Node.text),
        tensors=tuple(optional(f, "tensors", Node.texts) or ()),
        formats=_formats(f, node),
        family=optional(f, "family", lambda n: n.choice((FAMILY_LINEAR, FAMILY_MOE))),
        scheme=scheme,
        unverified=optional(f, "unverified", Node.text),
    )


def _formats(fields: dict[str, Node], node: Node) -> tuple[str, ...]:
    formats = optional(fields, "formats", Node.texts) or ()
    for fmt in formats:
        if fmt not in FORMATS:
            raise fields["formats"].error(f"{fmt!r} is not one of: {', '.join(FORMATS)}")
    return tuple(formats)
