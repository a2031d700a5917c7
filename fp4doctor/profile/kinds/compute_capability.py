"""`compute_capability: [100, 103]` (exact, major*10+minor) or `">=10.0,<13.0"` (a range).

Checked on every GPU the engine will use; a backend is valid only where all of them pass.

    - compute_capability: [100, 103, 110, 120, 121]
    - compute_capability: ">=10.0,<11.0"
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node
from fp4doctor.versions import contains, spec_text


def cc_text(cc: int) -> str:
    return f"{cc // 10}.{cc % 10}"


@dataclass(frozen=True)
class ComputeCapability(Kind):
    """Every GPU's compute capability is one listed, or in a range."""

    key = "compute_capability"

    exact: tuple[int, ...] = ()  # the listed capabilities, or
    spec: SpecifierSet | None = None  # a range over "major.minor"

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        if value.is_list():
            exact = tuple(n.integer() for n in value.sequence())
            if not exact:
                raise value.error("should list at least one compute capability (e.g. [100, 103])")
            return cls(exact=exact)
        return cls(spec=value.specifier())

    @property
    def per_gpu(self) -> bool:
        return True

    def wanted(self) -> str:
        if self.spec is not None:
            return f"compute capability {spec_text(self.spec)}"
        ccs = [cc_text(c) for c in self.exact]
        if len(ccs) == 1:
            return f"compute capability {ccs[0]}"
        return f"compute capability {', '.join(ccs[:-1])} or {ccs[-1]}"

    def accepts(self, cc: int) -> bool:
        if self.spec is not None:
            return bool(contains(self.spec, cc_text(cc)))
        return cc in self.exact

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        if gpu is None:
            return Check(False, "no NVIDIA GPU is visible", self.wanted())
        measured = f"GPU {gpu.index} ({gpu.name}) has compute capability {gpu.cc_text}"
        return Check(self.accepts(gpu.cc), measured, self.wanted())

    def describe(self) -> str:
        if self.spec is not None:
            return f"compute capability {spec_text(self.spec)}"
        return "compute capability one of " + ", ".join(cc_text(c) for c in self.exact)
