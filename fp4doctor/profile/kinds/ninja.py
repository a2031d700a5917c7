"""`ninja: true` — ninja on PATH (FlashInfer's JIT builds with it).

- ninja: true
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node


@dataclass(frozen=True)
class Ninja(Kind):
    """ninja is on PATH."""

    key = "ninja"

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        if not value.boolean():
            raise value.error("only 'ninja: true' is meaningful")
        return cls()

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        path = ctx.facts.toolchain.ninja_path
        return Check(path is not None, f"ninja at {path}" if path else "no ninja on PATH", "ninja")

    def describe(self) -> str:
        return "ninja on PATH"

    def default_fix(self, ctx: Context) -> str | None:
        return "pip install ninja"
