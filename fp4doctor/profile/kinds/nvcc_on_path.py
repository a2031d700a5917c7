"""`nvcc_on_path: true` — nvcc found on PATH itself (`shutil.which("nvcc")`), whatever CUDA_HOME
says: how vLLM before 0.32 looks for it (vllm/utils/flashinfer.py has_flashinfer). The `nvcc`
kind follows FlashInfer's own lookup instead (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda).

- nvcc_on_path: true
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node


def nvcc_on_path(ctx: Context) -> str | None:
    """The nvcc on PATH the facts record; a snapshot from before the probe recorded it says so
    only where its CUDA home came from PATH."""
    tc = ctx.facts.toolchain
    if tc.nvcc_on_path:
        return tc.nvcc_on_path
    return tc.nvcc_path if tc.cuda_home_source == "PATH" else None


@dataclass(frozen=True)
class NvccOnPath(Kind):
    """nvcc is on PATH."""

    key = "nvcc_on_path"

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        if not value.boolean():
            raise value.error("only 'nvcc_on_path: true' is meaningful")
        return cls()

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        path = nvcc_on_path(ctx)
        if path:
            return Check(True, f"nvcc on PATH at {path}", "nvcc on PATH")
        home = ctx.facts.toolchain.nvcc_path
        where = f" (only {home}, under the CUDA home)" if home else ""
        return Check(False, f"no nvcc on PATH{where}", "nvcc on PATH")

    def describe(self) -> str:
        return "nvcc on PATH"

    def default_fix(self, ctx: Context) -> str | None:
        home = ctx.facts.toolchain.cuda_home
        return f'export PATH="{home}/bin:$PATH"' if home else "put the CUDA toolkit's bin on PATH"
