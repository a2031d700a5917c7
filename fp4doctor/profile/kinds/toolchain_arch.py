"""`toolchain_arch: triton_ptxas` (or `nvcc`) — the compiler that will build kernels at run time
knows this GPU's architecture: its CUDA release is at least the one that introduced it.

    - toolchain_arch: triton_ptxas
      when: {triton: ">=3.0"}

Checked on every GPU. The first CUDA release of each architecture is the CUDA Toolkit's own
record (release notes: 12.8 adds sm_100, sm_101 and sm_120; 12.9 adds sm_103 and sm_121; 13.0
renames Thor's sm_101 to sm_110). An architecture newer than this table is passed with a note
that the boundary is not verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node
from fp4doctor.versions import contains

# compute capability -> the first CUDA release whose compilers know it
FIRST_CUDA = {
    75: "10.0",
    80: "11.0",
    86: "11.1",
    87: "11.4",
    89: "11.8",
    90: "11.8",
    100: "12.8",
    101: "12.8",
    103: "12.9",
    110: "13.0",
    120: "12.8",
    121: "12.9",
}
TOOLS = ("triton_ptxas", "nvcc")
_FIX = {
    "triton_ptxas": "export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas "
    "TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda/bin/ptxas (a CUDA {cuda}+ toolkit's ptxas), "
    "or upgrade triton",
    "nvcc": "install CUDA {cuda} or newer and point CUDA_HOME at it",
}


@dataclass(frozen=True)
class ToolchainArch(Kind):
    """A run-time compiler knows this GPU's architecture."""

    key = "toolchain_arch"

    tool: str

    @property
    def per_gpu(self) -> bool:
        return True

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        return cls(value.choice(TOOLS))

    def default_id(self) -> str:
        return f"{self.tool}_arch"

    def packages(self) -> tuple[str, ...]:
        return ("triton",) if self.tool == "triton_ptxas" else ()

    def _tool(self, ctx: Context, gpu: Gpu) -> tuple[str, str | None, str | None]:
        """(how it is named, path, CUDA release) of the compiler used for this GPU."""
        tc = ctx.facts.toolchain
        if self.tool == "nvcc":
            return "nvcc", tc.nvcc_path, tc.nvcc_version
        if gpu.cc >= 100:
            return (
                "Triton's ptxas",
                tc.triton_ptxas_blackwell_path,
                tc.triton_ptxas_blackwell_version,
            )
        return "Triton's ptxas", tc.triton_ptxas_path, tc.triton_ptxas_version

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        if gpu is None:
            return Check(False, "no NVIDIA GPU is visible", f"a {self.tool} that knows the GPU")
        first = FIRST_CUDA.get(gpu.cc)
        arch = f"sm_{gpu.cc}"
        name, path, release = self._tool(ctx, gpu)
        if first is None:
            wanted = f"{name} that knows {arch}"
            return Check(True, f"{arch} is newer than fp4doctor's table (not verified)", wanted)
        wanted = f"{name} from CUDA {first} or newer (GPU {gpu.index} is {arch})"
        if path is None or release is None:
            return Check(False, f"{name}: not found or no version", wanted)
        ok = contains(SpecifierSet(f">={first}"), release)
        return Check(bool(ok), f"{name} {path} is CUDA {release}", wanted)

    def describe(self) -> str:
        what = "Triton's ptxas" if self.tool == "triton_ptxas" else "nvcc"
        return (
            f"{what} knows the GPU's architecture (CUDA 12.8 for sm_100 and sm_120, 12.9 for "
            "sm_103 and sm_121, 13.0 for sm_110)"
        )

    def default_fix(self, ctx: Context) -> str | None:
        needed = [FIRST_CUDA[g.cc] for g in ctx.gpus if g.cc in FIRST_CUDA]
        cuda = max(needed, key=Version) if needed else "13.0"
        return _FIX[self.tool].format(cuda=cuda)
