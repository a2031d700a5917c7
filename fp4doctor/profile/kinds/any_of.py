"""`any_of: [...]` — at least one nested requirement holds (of those whose `when` applies).
Needs an `id`.

    - id: flashinfer_kernels
      any_of:
        - package: flashinfer-cubin
        - env: VLLM_HAS_FLASHINFER_CUBIN
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.all_of import parse_children
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node

if TYPE_CHECKING:
    from fp4doctor.profile.model import Requirement


@dataclass(frozen=True)
class AnyOf(Kind):
    key = "any_of"

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
        results = [r.check(ctx, gpu) for r in self.requirements if r.applies(ctx)]
        if not results:
            return Check(True, "no alternative applies", "nothing")
        required = " or ".join(
            f"({r.required})" if " and " in r.required else r.required for r in results
        )
        passed = [r for r in results if r.ok]
        if passed:
            return Check(True, passed[0].measured, required)
        return Check(False, "; ".join(r.measured for r in results), required)

    def describe(self) -> str:
        return "(" + " or ".join(r.inline() for r in self.requirements) + ")"
