"""`compute_capability: [100, 103]` (exact, major*10+minor), `">=10.0,<13.0"` (a range), or a
list of both (a GPU passes when it matches any item).

Checked on every GPU the engine will use; a backend is valid only where all of them pass. An
engine gate on a family (vLLM's `is_device_capability_family(100)`: every 10.x) is written as a
range, so that a member nobody listed (10.7) is not refused:

    - compute_capability: [100, 103, 110, 120, 121]
    - compute_capability: ">=10.0,<11.0"
    - compute_capability: [">=10.0,<11.0", ">=12.0,<13.0"]
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

    exact: tuple[int, ...] = ()  # the listed capabilities, and/or
    spec: SpecifierSet | None = None  # a range over "major.minor", or
    specs: tuple[SpecifierSet, ...] = ()  # the ranges of a list (with `exact`, any one passes)

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        if value.is_list():
            items = value.sequence()
            if not items:
                raise value.error("should list at least one compute capability (e.g. [100, 103])")
            ranges = tuple(n.specifier() for n in items if not n.is_integer())
            exact = tuple(n.integer() for n in items if n.is_integer())
            return cls(exact=exact, specs=ranges)
        return cls(spec=value.specifier())

    @property
    def per_gpu(self) -> bool:
        return True

    def wanted(self) -> str:
        if self.spec is not None:
            return f"compute capability {spec_text(self.spec)}"
        ccs = [cc_text(c) for c in self.exact] + [spec_text(s) for s in self.specs]
        if len(ccs) == 1:
            return f"compute capability {ccs[0]}"
        return f"compute capability {', '.join(ccs[:-1])} or {ccs[-1]}"

    def accepts(self, cc: int) -> bool:
        if self.spec is not None:
            return bool(contains(self.spec, cc_text(cc)))
        return cc in self.exact or any(contains(s, cc_text(cc)) for s in self.specs)

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        if gpu is None:
            return Check(False, "no NVIDIA GPU is visible", self.wanted())
        measured = f"GPU {gpu.index} ({gpu.name}) has compute capability {gpu.cc_text}"
        return Check(self.accepts(gpu.cc), measured, self.wanted())

    def describe(self) -> str:
        if self.spec is not None:
            return f"compute capability {spec_text(self.spec)}"
        items = [cc_text(c) for c in self.exact] + [spec_text(s) for s in self.specs]
        return "compute capability one of " + ", ".join(items)
