"""`use: NAME` — every requirement of a named entry of the profile's `conditions` (or of a module
it includes). In a backend's `requires`, each part becomes its own finding.

    - use: has_flashinfer
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.all_of import all_hold
from fp4doctor.profile.kinds.base import Check, Composite, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node


@dataclass(frozen=True)
class Use(Composite):
    """Every requirement of a named condition."""

    key = "use"

    name: str = ""

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        name = value.text()
        if name not in named:
            valid = ", ".join(named) or "none are defined above this point"
            raise value.error(f"names no entry of 'conditions' (valid: {valid})")
        return cls(named[name], name)

    def default_id(self) -> str:
        return self.name

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        return all_hold(self.requirements, ctx, gpu)

    def describe(self) -> str:
        text = " and ".join(r.inline() for r in self.requirements)
        return f"({text})" if len(self.requirements) > 1 else text

    def reference(self) -> str:
        """The condition by name, where its parts are listed elsewhere (automatic orders)."""
        return f"*{self.name}*"
