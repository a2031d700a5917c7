"""What every requirement kind is: parse itself, check the host, describe itself, fix itself.

A kind is one small class in its own module (see `fp4doctor.profile.kinds` for the registry).
It holds only its own argument; what every requirement shares (id, `when`, fix, source, reason,
line) lives on `Requirement` (below), which wraps a kind.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from packaging.specifiers import SpecifierSet

from fp4doctor.deployment import Deployment
from fp4doctor.facts import Gpu, HostFacts, canonical_name
from fp4doctor.versions import contains, spec_text

if TYPE_CHECKING:
    from fp4doctor.profile.yamlnode import Node

VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TRUE_WORDS = ("1", "true", "yes", "on")


def is_true(value: str | None) -> bool:
    """How the engines read a boolean variable that is not parsed with int(): 1/true/yes/on."""
    return value is not None and value.strip().lower() in TRUE_WORDS


@dataclass(frozen=True)
class Context:
    """What the rules look at: the facts, the package versions (engine version applied), env."""

    facts: HostFacts
    versions: Mapping[str, str]  # canonical distribution name -> installed version
    env: Mapping[str, str]
    # The engine version being judged (it may not be installed): `when` conditions use it.
    engine: tuple[str, str] | None = None
    # What the user will run (--ep, --model, ...): known bugs' triggers are judged against it.
    deployment: Deployment = field(default_factory=Deployment)
    # The engine's flags as the command line sets them (flag -> value, `--linear-backend`):
    # a CLI knob set there selects a backend as an environment variable does.
    args: Mapping[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> list[Gpu]:
        return self.facts.gpus

    def version(self, dist: str) -> str | None:
        """The installed version of `dist` (for the engine: the one --engine-version names)."""
        return self.versions.get(canonical_name(dist))

    def judged_version(self, dist: str) -> str | None:
        """What `when` conditions compare: the engine version being judged, even when it is not
        installed (the profile's newest), else the installed version."""
        if self.engine is not None and canonical_name(dist) == self.engine[0]:
            return self.engine[1]
        return self.version(dist)


@dataclass(frozen=True)
class Check:
    """The outcome of one requirement on the host (or one GPU): what was measured, what is
    required, in words a user reads. `read` is False when the fact could not be looked at here
    (a binary not installed, a snapshot without its scan): the requirement does not block
    (`ok`), and its finding says "not read" (skip), never that it passed."""

    ok: bool
    measured: str
    required: str
    read: bool = True


# Parses a nested requirement (for the kinds that combine others).
ParseChild = Callable[["Node"], "Requirement"]
# The named conditions a `use:` may refer to.
Named = Mapping[str, tuple["Requirement", ...]]


class Kind(ABC):
    """One kind of requirement. Subclasses set `key` (the YAML key) and implement the rest."""

    key: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()  # other keys this kind reads beside `key`

    @classmethod
    @abstractmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        """Build the kind from its YAML value (and its `options` among `fields`)."""

    @abstractmethod
    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        """Does the host (or `gpu`, for per-GPU kinds) meet it? Never raises for odd facts."""

    @abstractmethod
    def describe(self) -> str:
        """The requirement in plain words (Markdown), for docs and reports."""

    @property
    def per_gpu(self) -> bool:
        """Checked on each GPU rather than once per host."""
        return False

    def default_id(self) -> str:
        """The finding id when the profile gives none."""
        return self.key

    def default_fix(self, ctx: Context) -> str | None:
        """A safe command or setting that meets it, when the profile names none."""
        return None

    def packages(self) -> tuple[str, ...]:
        """The distributions whose versions the check reads (the probe looks them up)."""
        return ()

    def children(self) -> tuple[Requirement, ...]:
        """Nested requirements, for the kinds that combine others."""
        return ()


@dataclass(frozen=True)
class Composite(Kind):
    """A kind over nested requirements (all_of, any_of, use). all_of and any_of need an `id`:
    their finding has no other name."""

    requirements: tuple[Requirement, ...]

    @property
    def per_gpu(self) -> bool:
        return any(r.per_gpu for r in self.requirements)

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        if "id" not in fields:
            raise value.error(f"an '{cls.key}' requirement needs an 'id'")
        requirements = tuple(child(n) for n in value.sequence())
        if not requirements:
            raise value.error("should list at least one requirement")
        return cls(requirements)

    def children(self) -> tuple[Requirement, ...]:
        return self.requirements


@dataclass(frozen=True)
class VersionKind(Kind):
    """A specifier over one version the host reports: cuDNN, CUDA runtime, driver, nvcc."""

    label: ClassVar[str]  # "cuDNN backend": how the value is named in a check's text
    words: ClassVar[str]  # how the docs name it
    present_only: ClassVar[bool] = False  # `key: true` means "present at any version"

    spec: SpecifierSet

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        if cls.present_only and value.scalar() is True:
            return cls(SpecifierSet(""))
        return cls(value.specifier())

    @abstractmethod
    def found(self, ctx: Context) -> str | None:
        """The version on this host, or None."""

    @abstractmethod
    def missing(self, ctx: Context) -> str:
        """Why no version was found, in a user's words."""

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        spec = self.spec
        wanted = f"{self.label} {spec_text(spec)}" if str(spec) else f"{self.label} present"
        found = self.found(ctx)
        if found is None:
            return Check(False, self.missing(ctx), wanted)
        ok = contains(self.spec, found)
        if ok is None:
            unreadable = f"{self.label} {found} (not a version fp4doctor can compare)"
            return Check(False, unreadable, wanted)
        return Check(ok, f"{self.label} {found}", wanted)

    def describe(self) -> str:
        if not str(self.spec):
            return f"{self.words} found"
        return f"{self.words} {spec_text(self.spec)}"


_FIX_REF = re.compile(r"\{fix:([a-z_]+)\}")
_VERSION_REF = re.compile(r"\{version:([A-Za-z0-9_.-]+)\}")


@dataclass(frozen=True)
class Requirement:
    """One condition on the host: a kind (`fp4doctor.profile.kinds`) and what every rule shares.

    `when` limits it to versions of other packages (the engine's included: the version judged);
    with `when_absent`, it also applies when a `when` package is not installed (what a fresh
    install gets). `fix` may name `{version:DIST}`, filled in with DIST's installed version.
    """

    kind: Kind
    id: str
    when: tuple[tuple[str, SpecifierSet], ...] = ()
    when_absent: bool = False
    fix: str | None = None
    source: str | None = None
    reason: str | None = None  # a sentence that explains why the rule exists
    line: int = 0

    @property
    def per_gpu(self) -> bool:
        return self.kind.per_gpu

    @property
    def children(self) -> tuple[Requirement, ...]:
        return self.kind.children()

    def applies(self, ctx: Context) -> bool:
        """Whether the `when` conditions hold for the versions judged.

        A version that cannot be read counts as absent: the `when_absent` variant (what a fresh
        install gets) applies, never none of them (which would drop the rule silently)."""
        for dist, spec in self.when:
            judged = ctx.judged_version(dist)
            matched = None if judged is None else contains(spec, judged)
            if matched is None:
                if not self.when_absent:
                    return False
                continue
            if not matched:
                return False
        return True

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        return self.kind.check(ctx, gpu)

    def fix_for(self, ctx: Context) -> str | None:
        """The profile's fix (with `{version:DIST}` filled in), or the kind's default; a fix
        that is only the default of a nested kind says so with `{fix:KIND}` (`{fix:same_version}`
        pins a release the package index has)."""
        if self.fix:
            fix = _FIX_REF.sub(lambda m: self._nested_fix(m.group(1), ctx), self.fix)
            return _VERSION_REF.sub(lambda m: ctx.version(m.group(1)) or "<version>", fix)
        return self.kind.default_fix(ctx)

    def _nested_fix(self, key: str, ctx: Context) -> str:
        for child in self.children:
            if child.kind.key == key:
                return child.kind.default_fix(ctx) or ""
            nested = child._nested_fix(key, ctx)
            if nested:
                return nested
        return ""

    def when_text(self) -> str:
        if not self.when:
            return ""
        text = " and ".join(f"{dist} {spec_text(spec)}" for dist, spec in self.when)
        return f"when {text}" + (" or absent" if self.when_absent else "")

    def inline(self) -> str:
        """In plain words with its when-condition, for use inside a sentence."""
        when = self.when_text()
        return f"{self.kind.describe()} ({when})" if when else self.kind.describe()

    def packages(self) -> set[str]:
        """Every distribution this requirement (and what it nests) reads."""
        names = set(self.kind.packages()) | {dist for dist, _ in self.when}
        for child in self.children:
            names |= child.packages()
        return names
