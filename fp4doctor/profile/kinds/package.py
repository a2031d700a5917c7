"""`package: NAME` — a distribution installed (at `version: SPEC`), or absent (`installed: false`).

- package: nvidia-cudnn-frontend
  version: ">=1.13"
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet

from fp4doctor.facts import Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node, optional
from fp4doctor.versions import contains, spec_text


@dataclass(frozen=True)
class Package(Kind):
    """A distribution is installed (at a version in a range), or absent."""

    key = "package"
    options = ("version", "installed")

    name: str
    version: SpecifierSet | None = None
    absent: bool = False  # `installed: false`: the package must not be installed

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        installed = optional(fields, "installed", Node.boolean)
        return cls(
            name=value.text(),
            version=optional(fields, "version", Node.specifier),
            absent=installed is False,
        )

    def default_id(self) -> str:
        return self.name

    def packages(self) -> tuple[str, ...]:
        return (self.name,)

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        name, installed = self.name, ctx.version(self.name)
        if self.absent:
            return Check(
                installed is None,
                f"{name} {installed} is installed" if installed else f"{name} is not installed",
                f"{name} not installed",
            )
        wanted = f"{name} {spec_text(self.version)}" if self.version else f"{name} installed"
        if installed is None:
            return Check(False, f"{name} is not installed", wanted)
        if self.version is None:
            return Check(True, f"{name} {installed}", wanted)
        ok = contains(self.version, installed)
        if ok is None:
            return Check(False, f"{name} {installed} (not a version fp4doctor can compare)", wanted)
        return Check(ok, f"{name} {installed}", wanted)

    def describe(self) -> str:
        name = f"`{self.name}`"
        if self.absent:
            if self.version is not None:
                return f"{name} not installed at {spec_text(self.version)}"
            return f"{name} not installed"
        if self.version is not None:
            return f"{name} {spec_text(self.version)}"
        return f"{name} installed"

    def default_fix(self, ctx: Context) -> str | None:
        if self.absent:
            return f"pip uninstall {self.name}"
        spec = str(self.version) if self.version else ""
        return f"pip install '{self.name}{spec}'" if spec else f"pip install {self.name}"
