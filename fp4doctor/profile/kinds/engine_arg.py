"""`engine_arg: FLAG` — the engine's command line sets FLAG to `equals: VALUE`.

    - engine_arg: --quantization
      equals: modelopt_fp4

For the engine's own argument post-processing: SGLang's server-args passes rewrite
`--moe-runner-backend auto` by what other flags say (`--quantization modelopt_fp4` on SM12x
moves it to `flashinfer_cutlass`), so the automatic order depends on flags a user sets. The
flags come from the context's `args` (flag -> value, as the command line sets them); a flag not
given holds its release default, which is never the value such a rewrite waits for, so it does
not hold. With no command line known the flag is "not given".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node


def given_args(ctx: Context) -> Mapping[str, str]:
    """The engine's flags as the command line sets them (empty when none is known). Read with
    getattr: the command line reaches the context through `Context.args` (issue 38)."""
    args = getattr(ctx, "args", None)
    return args if isinstance(args, Mapping) else {}


@dataclass(frozen=True)
class EngineArg(Kind):
    """A flag of the engine's command line is set to a given value."""

    key = "engine_arg"
    options = ("equals",)

    flag: str
    equals: str

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        flag = value.text()
        if not flag.startswith("--") or len(flag) < 3 or any(c.isspace() for c in flag):
            raise value.error(f"{flag!r} is not a command-line flag (--name)")
        if "equals" not in fields:
            raise value.error("an 'engine_arg' requirement needs 'equals: VALUE'")
        return cls(flag, fields["equals"].text())

    def default_id(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        wanted = f"{self.flag} {self.equals}"
        value = given_args(ctx).get(self.flag)
        if value is None:
            return Check(False, f"{self.flag} is not given", wanted)
        return Check(value == self.equals, f"{self.flag} {value}", wanted)

    def describe(self) -> str:
        return f"`{self.flag} {self.equals}` on the engine's command line"

    def default_fix(self, ctx: Context) -> str | None:
        return f"pass {self.flag} {self.equals} to the engine"
