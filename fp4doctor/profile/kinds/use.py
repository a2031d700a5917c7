"""`use: NAME` — every requirement of a named entry of the profile's `conditions` (or of a module
it includes). In a backend's `requires`, each part becomes its own finding.

    - use: has_flashinfer
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.all_of import all_hold
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node

if TYPE_CHECKING:
    from fp4doctor.profile.model import Requirement


@dataclass(frozen=True)
class Use(Kind):
    key = "use"

    name: str
    requirements: tuple[Requirement, ...]

    @property
    def per_gpu(self) -> bool:
        return any(r.per_gpu for r in self.requirements)

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        name = value.text()
        if name not in named:
            valid = ", ".join(named) or "none are defined above this point"
            raise value.error(f"names no entry of 'conditions' (valid: {valid})")
        return cls(name, named[name])

    def default_id(self) -> str:
        return self.name

    def children(self) -> tuple[Requirement, ...]:
        return self.requirements

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        return all_hold(self.requirements, ctx, gpu)

    def describe(self) -> str:
        text = " and ".join(r.inline() for r in self.requirements)
        return f"({text})" if len(self.requirements) > 1 else text

    def reference(self) -> str:
        """The condition by name, where its parts are listed elsewhere (automatic orders)."""
        return f"*{self.name}*"
