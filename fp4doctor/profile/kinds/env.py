"""`env: NAME` — a variable set to a true value (1, true, yes, on), or to `equals: VALUE`.

- env: VLLM_HAS_FLASHINFER_CUBIN
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import (
    VAR_RE,
    Check,
    Context,
    Kind,
    Named,
    ParseChild,
    is_true,
)
from fp4doctor.profile.yamlnode import Node, optional


@dataclass(frozen=True)
class Env(Kind):
    """A variable is set to a true value, or to a given one."""

    key = "env"
    options = ("equals",)

    name: str
    equals: str | None = None

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        name = value.text()
        if not VAR_RE.match(name):
            raise value.error(f"{name!r} is not a valid environment variable name")
        return cls(name, optional(fields, "equals", Node.text))

    def default_id(self) -> str:
        return self.name

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        value = ctx.env.get(self.name)
        if self.equals is not None:
            wanted, ok = f"{self.name}={self.equals}", value == self.equals
        else:
            wanted, ok = f"{self.name} set to a true value", is_true(value)
        measured = f"{self.name}={value}" if value is not None else f"{self.name} is not set"
        return Check(ok, measured, wanted)

    def describe(self) -> str:
        if self.equals is not None:
            return f"`{self.name}={self.equals}` set"
        return f"`{self.name}` set to a true value"

    def default_fix(self, ctx: Context) -> str | None:
        return f"export {self.name}={self.equals or '1'}"
