"""`any_of: [...]` — at least one nested requirement holds (of those whose `when` applies).
Needs an `id`.

    - id: flashinfer_kernels
      any_of:
        - package: flashinfer-cubin
        - env: VLLM_HAS_FLASHINFER_CUBIN
"""

from __future__ import annotations

from dataclasses import dataclass

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Composite, Context


@dataclass(frozen=True)
class AnyOf(Composite):
    """At least one nested requirement holds."""

    key = "any_of"

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
        # Each measurement once: two alternatives that both need a GPU both say there is none.
        return Check(False, "; ".join(dict.fromkeys(r.measured for r in results)), required)

    def describe(self) -> str:
        return "(" + " or ".join(r.inline() for r in self.requirements) + ")"
