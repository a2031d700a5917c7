"""`all_of: [...]` — every nested requirement holds (those whose `when` applies). Needs an `id`.

- id: nvcc_and_ninja
  all_of:
    - nvcc: ">=12.8"
    - ninja: true
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node

if TYPE_CHECKING:
    from fp4doctor.profile.model import Requirement


def parse_children(value: Node, child: ParseChild) -> tuple[Requirement, ...]:
    children = tuple(child(n) for n in value.sequence())
    if not children:
        raise value.error("should list at least one requirement")
    return children


def all_hold(requirements: tuple[Requirement, ...], ctx: Context, gpu: Gpu | None) -> Check:
    """The conjunction of the requirements that apply: one Check saying what failed."""
    results = [r.check(ctx, gpu) for r in requirements if r.applies(ctx)]
    failed = [r for r in results if not r.ok]
    required = " and ".join(r.required for r in results) or "nothing"
    if failed:
        return Check(False, "; ".join(r.measured for r in failed), required)
    return Check(True, "; ".join(r.measured for r in results), required)


@dataclass(frozen=True)
class AllOf(Kind):
    key = "all_of"

    requirements: tuple[Requirement, ...]

    @property
    def per_gpu(self) -> bool:
        return any(r.per_gpu for r in self.requirements)

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        if "id" not in fields:
            raise value.error(f"an '{cls.key}' requirement needs an 'id'")
        return cls(parse_children(value, child))

    def children(self) -> tuple[Requirement, ...]:
        return self.requirements

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        return all_hold(self.requirements, ctx, gpu)

    def describe(self) -> str:
        return "(" + " and ".join(r.inline() for r in self.requirements) + ")"
