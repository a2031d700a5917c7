"""`same_version: [A, B]` — two distributions installed at the same version (A follows B); a
local build suffix (`0.7.4+cu129`) is not a different version.

- same_version: [flashinfer-cubin, flashinfer-python]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from fp4doctor import released
from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node


@dataclass(frozen=True)
class SameVersion(Kind):
    """Two distributions are installed at the same version."""

    key = "same_version"

    follower: str
    leader: str

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        names = value.texts()
        if len(names) != 2:
            raise value.error("should list exactly two distributions")
        return cls(names[0], names[1])

    def packages(self) -> tuple[str, ...]:
        return (self.follower, self.leader)

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        a, b = self.follower, self.leader
        va, vb = ctx.version(a), ctx.version(b)
        wanted = f"{a} at the same version as {b}"
        if va is None:
            return Check(False, f"{a} is not installed" + (f" ({b} {vb})" if vb else ""), wanted)
        if vb is None:
            return Check(False, f"{b} is not installed", wanted)
        try:
            same = Version(va).public == Version(vb).public
        except InvalidVersion:
            same = va == vb
        return Check(same, f"{a} {va}, {b} {vb}", wanted)

    def describe(self) -> str:
        return f"`{self.follower}` installed at the same version as `{self.leader}`"

    def default_fix(self, ctx: Context) -> str | None:
        leader = ctx.version(self.leader)
        if leader is None:
            return f"pip install {self.follower}=={'<' + self.leader + ' version>'}"
        if released.exists(self.follower, leader) is not False:
            return f"pip install {self.follower}=={leader}"
        # No such release to pin (flashinfer-cubin has no 0.6.16.post3 on PyPI): both at the
        # newest version the index has for each, not newer than the installed one.
        common = released.newest_common(self.follower, self.leader, leader)
        if common is None:
            return (
                f"{self.follower} {leader} is not on the package index: install {self.leader} "
                f"at a version that has a {self.follower} release"
            )
        return (
            f"pip install '{self.leader}=={common}' '{self.follower}=={common}' "
            f"({self.follower} {leader} is not on PyPI, this pair is the newest there; or "
            f"{self.follower} {leader} from the wheel index that has it)"
        )
