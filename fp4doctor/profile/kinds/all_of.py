"""`all_of: [...]` — every nested requirement holds (those whose `when` applies). Needs an `id`.

- id: nvcc_and_ninja
  all_of:
    - nvcc: ">=12.8"
    - ninja: true
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Composite, Context

if TYPE_CHECKING:
    from fp4doctor.profile.kinds.base import Requirement


def all_hold(requirements: tuple[Requirement, ...], ctx: Context, gpu: Gpu | None) -> Check:
    """The conjunction of the requirements that apply: one Check saying what failed."""
    results = [r.check(ctx, gpu) for r in requirements if r.applies(ctx)]
    failed = [r for r in results if not r.ok]
    required = " and ".join(r.required for r in results) or "nothing"
    # Each measurement once (two requirements on the same GPU may measure the same thing).
    if failed:
        return Check(False, "; ".join(dict.fromkeys(r.measured for r in failed)), required)
    return Check(True, "; ".join(dict.fromkeys(r.measured for r in results)), required)


@dataclass(frozen=True)
class AllOf(Composite):
    """Every nested requirement holds."""

    key = "all_of"

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        return all_hold(self.requirements, ctx, gpu)

    def describe(self) -> str:
        return "(" + " and ".join(r.inline() for r in self.requirements) + ")"
