"""`cudart_loader: [12, 13]` — a loader that opens `libcudart.so.N` for each listed major, in
order, and needs exactly one of them to open, finds exactly one.

    - cudart_loader: [12, 13]
      when: {nvidia-cudnn-frontend: ">=1.12.0,<1.25.0"}

cudnn-frontend's wheels throw "Multiple libcudart libraries found" when two open and "Unable to
load any libcudart.so.* library" when none does (probe/cudart.py says which releases). A major
counts as loadable when a copy is on the loader's own search path (`LD_LIBRARY_PATH`, the
ld.so.cache) or when torch's CUDA build is that major (torch loads its runtime into the process
first). A runtime wheel torch does not use, or a toolkit outside the search path, is listed in
the measured text but not counted. A host where no runtime is seen at all is passed with a note:
an absent runtime is the CUDA runtime rules' business, and torch may carry one this probe cannot
name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node


def _sonames(majors: tuple[int, ...]) -> str:
    return " and ".join(f"libcudart.so.{m}" for m in majors)


@dataclass(frozen=True)
class CudartLoader(Kind):
    """A libcudart loader finds exactly one of the sonames it tries."""

    key = "cudart_loader"

    majors: tuple[int, ...]  # the sonames the loader tries, in its order

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        majors = tuple(n.integer() for n in value.sequence())
        if not majors or any(m <= 0 for m in majors) or len(set(majors)) != len(majors):
            raise value.error("should list the CUDA majors the loader tries, e.g. [12, 13]")
        return cls(majors)

    def packages(self) -> tuple[str, ...]:
        return ("torch",)

    def loadable(self, ctx: Context) -> dict[int, str]:
        """Major -> why it would open: where it lies on the search path, or torch's build."""
        cudart = ctx.facts.cudart
        found: dict[int, str] = {}
        for lib in cudart.libraries if cudart else ():
            if lib.on_loader_path:
                found.setdefault(lib.major, f"{lib.path} ({lib.origin})")
        torch_cuda = ctx.facts.packages.torch_cuda
        major = torch_cuda.split(".")[0] if torch_cuda else ""
        if major.isdigit():
            found.setdefault(int(major), f"torch's CUDA {torch_cuda} runtime, loaded with torch")
        return found

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        wanted = f"exactly one of {_sonames(self.majors)} loadable"
        if len(self.majors) == 1:
            wanted = f"libcudart.so.{self.majors[0]} loadable"
        if ctx.facts.cudart is None:
            return Check(True, "libcudart not checked: the facts carry no scan of it", wanted)
        found = self.loadable(ctx)
        tried = {m: why for m, why in found.items() if m in self.majors}
        others = [
            f"{lib.path} ({lib.origin}, not on the loader's path)"
            for lib in ctx.facts.cudart.libraries
            if not lib.on_loader_path and lib.major not in found
        ]
        aside = f"; also {', '.join(others)}" if others else ""
        if not found:
            return Check(True, f"no libcudart found to judge{aside}", wanted)
        listed = "; ".join(f"libcudart.so.{m}: {why}" for m, why in sorted(found.items()))
        if len(tried) > 1:
            return Check(False, f"{len(tried)} majors loadable: {listed}{aside}", wanted)
        if not tried:
            return Check(False, f"none of {_sonames(self.majors)}: {listed}{aside}", wanted)
        return Check(True, f"{listed}{aside}", wanted)

    def describe(self) -> str:
        if len(self.majors) == 1:
            return f"`libcudart.so.{self.majors[0]}` loadable"
        return f"exactly one of {_sonames(self.majors)} loadable (by soname, as `dlopen` finds it)"
