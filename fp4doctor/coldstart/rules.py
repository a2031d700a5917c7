"""The cold-start rules of `profiles/coldstart.yaml`, as typed data: which FlashInfer JIT modules
each backend's first call builds, per FlashInfer release and GPU; whether each engine release
autotunes at start-up, with its knobs and cache; and the reported costs.

Parsed with the profile machinery (`fp4doctor.profile.yamlnode`): a malformed entry is refused
with its file, line and key, and unknown keys are errors. A parse is kept in the profile cache
(fp4doctor/cache.py), so a run that hits it imports no YAML library.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

from fp4doctor import cache
from fp4doctor.profile import builtin_dir
from fp4doctor.profile.yamlnode import Node, ProfileError, optional, required
from fp4doctor.textfile import UnreadableText, read_text
from fp4doctor.versions import contains

SCHEMA = 1
FAMILIES = ("linear", "moe")
BUILDS = ("nvcc", "cute-dsl", "none")
CACHES = ("none", "single-rank", "all-ranks", "per-rank")
ESTIMATES = ("jit", "autotune")
BUILDER_RE = re.compile(r"^flashinfer(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Kernels:
    """What a backend's first call compiles, for the FlashInfer releases `flashinfer`: per
    compute capability (100 for 10.0), the JIT module it loads or builds."""

    id: str
    family: str
    backends: tuple[str, ...]
    flashinfer: SpecifierSet
    build: str
    source: str
    modules: tuple[tuple[tuple[int, ...], str, str | None], ...] = ()  # (ccs, module, builder)

    def applies(self, family: str, backend: str, flashinfer: str | None) -> bool:
        if self.family != family or backend not in self.backends:
            return False
        if flashinfer is None:  # no FlashInfer installed: only the engines' own kernels
            return self.build == "none"
        return contains(self.flashinfer, flashinfer) is True

    def module_for(self, cc: int) -> str | None:
        return next((m for ccs, m, _ in self.modules if cc in ccs), None)

    def builder_for(self, module: str) -> str | None:
        """The generator that builds `module` (`flashinfer.jit.gemm:gen_...`), when named."""
        return next((b for _, m, b in self.modules if m == module), None)


@dataclass(frozen=True)
class Autotune:
    """Whether an engine release autotunes FlashInfer's kernels at start-up, and how."""

    id: str
    target: str
    engine: SpecifierSet
    tunes: bool
    reason: str
    source: str
    compute_capability: SpecifierSet | None = None  # the GPUs it tunes on ("10.0" as text)
    cache: str = "none"
    disable_arg: str | None = None
    cache_dir_variable: str | None = None
    skip_variable: str | None = None
    skip_backends: tuple[str, ...] = ()  # skipped by default when one of these is chosen
    skip_ops: tuple[str, ...] = ()
    # The FlashInfer releases whose managed store (autotune_v2) the engine uses on one rank.
    managed_store: SpecifierSet | None = None

    def applies(self, target: str, version: str | None) -> bool:
        return (
            self.target == target and version is not None and contains(self.engine, version) is True
        )

    def keeps_file(self, autotune: bool | None, world: int | None) -> bool | None:
        """Whether the release writes FlashInfer's tuned tactics to a persistent file and reads
        them back, with the autotuner on or off (`autotune`) and `world` ranks (None: not known):
        never where it tunes in memory (`cache: none`) or not at all."""
        if not self.tunes or self.cache == "none" or autotune is False:
            return False
        if autotune is None:
            return None
        if self.cache == "single-rank":  # kept only when one rank serves (world_size == 1)
            return None if world is None else world == 1
        return True


@dataclass(frozen=True)
class Estimate:
    """A reported cost, with the conditions it was measured under."""

    id: str
    what: str
    flashinfer: SpecifierSet
    compute_capability: tuple[int, ...]
    source: str
    module: str | None = None
    seconds: float | None = None
    seconds_each: float | None = None
    each: str | None = None
    conditions: str | None = None

    def applies(self, what: str, flashinfer: str | None, cc: int, module: str | None) -> bool:
        return (
            self.what == what
            and flashinfer is not None
            and contains(self.flashinfer, flashinfer) is True
            and cc in self.compute_capability
            and (self.module is None or self.module == module)
        )


@dataclass(frozen=True)
class JitRules:
    """FlashInfer's JIT cache rules: the releases whose workspace layout is judged, the variable
    that forbids building, the release from which prebuilt modules come from providers."""

    workspace: SpecifierSet
    workspace_source: str
    disable_variable: str
    disable_source: str
    providers_from: str
    providers_source: str


@dataclass(frozen=True)
class Rules:
    """The whole file."""

    source: str
    jit: JitRules
    kernels: tuple[Kernels, ...]
    autotune: tuple[Autotune, ...]
    estimates: tuple[Estimate, ...]

    def kernels_for(self, family: str, backend: str, flashinfer: str | None) -> Kernels | None:
        return next((k for k in self.kernels if k.applies(family, backend, flashinfer)), None)

    def autotune_for(self, target: str, version: str | None) -> Autotune | None:
        return next((a for a in self.autotune if a.applies(target, version)), None)

    def module_names(self) -> tuple[str, ...]:
        """Every JIT module a rule names (the probe scans these in prebuilt packages)."""
        return tuple(dict.fromkeys(m for k in self.kernels for _, m, _ in k.modules))


def default_path() -> Path:
    return builtin_dir() / "coldstart.yaml"


@functools.lru_cache(maxsize=4)
def load(path: str | None = None) -> Rules:
    """The rules (the shipped file unless `path`); ProfileError names file, line and key."""
    file = str(path or default_path())
    return cache.cached("coldstart", file, lambda: (parse(_read(file), file), []))


def _read(file: str) -> str:
    try:
        return read_text(file)
    except UnreadableText as exc:
        raise ProfileError(str(exc)) from None


def parse(text: str, file: str) -> Rules:
    """The rules in `text` (read from `file`)."""
    from fp4doctor.profile.schema import compose  # the parser: only to parse

    root = compose(text, file)
    fields = root.mapping(("schema", "source", "jit", "kernels", "autotune", "estimates"))
    schema = required(fields, "schema", root)
    if schema.integer() != SCHEMA:
        raise schema.error(f"is {schema.integer()}; this fp4doctor reads schema {SCHEMA}")
    kernels = tuple(_kernels(n) for n in _seq(fields, "kernels"))
    autotune = tuple(_autotune(n) for n in _seq(fields, "autotune"))
    return Rules(
        source=required(fields, "source", root).text(),
        jit=_jit(required(fields, "jit", root)),
        kernels=kernels,
        autotune=autotune,
        estimates=tuple(_estimate(n) for n in _seq(fields, "estimates")),
    )


def _seq(fields: dict[str, Node], key: str) -> list[Node]:
    return fields[key].sequence() if key in fields else []


def _jit(node: Node) -> JitRules:
    keys = ("workspace", "workspace_source", "disable_variable", "disable_source",
            "providers_from", "providers_source")  # fmt: skip
    f = node.mapping(keys)
    return JitRules(
        workspace=required(f, "workspace", node).specifier(),
        workspace_source=required(f, "workspace_source", node).text(),
        disable_variable=required(f, "disable_variable", node).text(),
        disable_source=required(f, "disable_source", node).text(),
        providers_from=required(f, "providers_from", node).version(),
        providers_source=required(f, "providers_source", node).text(),
    )


def _ccs(node: Node) -> tuple[int, ...]:
    out = tuple(n.integer() for n in node.sequence())
    for n, cc in zip(node.sequence(), out, strict=True):
        if not 10 <= cc <= 200:
            raise n.error("is a compute capability written as major*10+minor (100 for 10.0)")
    return out


def _kernels(node: Node) -> Kernels:
    f = node.mapping(("id", "family", "backends", "flashinfer", "build", "modules", "source"))
    build = required(f, "build", node).choice(BUILDS)
    modules: list[tuple[tuple[int, ...], str, str | None]] = []
    for m in _seq(f, "modules"):
        mf = m.mapping(("compute_capability", "module", "builder"))
        builder = optional(mf, "builder", Node.text)
        if builder is not None and not BUILDER_RE.match(builder):
            raise mf["builder"].error("should be MODULE:FUNCTION (flashinfer.jit.gemm:gen_...)")
        ccs = _ccs(required(mf, "compute_capability", m))
        modules.append((ccs, required(mf, "module", m).text(), builder))
    if build == "nvcc" and not modules:
        raise node.error(
            "builds with nvcc but names no modules (modules: [{compute_capability, module}])"
        )
    return Kernels(
        id=required(f, "id", node).text(),
        family=required(f, "family", node).choice(FAMILIES),
        backends=required(f, "backends", node).texts(),
        flashinfer=required(f, "flashinfer", node).specifier(),
        build=build,
        source=required(f, "source", node).text(),
        modules=tuple(modules),
    )


def _autotune(node: Node) -> Autotune:
    keys = ("id", "target", "engine", "tunes", "compute_capability", "cache", "disable_arg",
            "cache_dir_variable", "skip_variable", "skip_default", "managed_store", "reason",
            "source")  # fmt: skip
    f = node.mapping(keys)
    skip_backends: tuple[str, ...] = ()
    skip_ops: tuple[str, ...] = ()
    if "skip_default" in f:
        sf = f["skip_default"].mapping(("backends", "ops"))
        skip_backends = required(sf, "backends", f["skip_default"]).texts()
        skip_ops = required(sf, "ops", f["skip_default"]).texts()
    return Autotune(
        id=required(f, "id", node).text(),
        target=required(f, "target", node).text(),
        engine=required(f, "engine", node).specifier(),
        tunes=required(f, "tunes", node).boolean(),
        reason=required(f, "reason", node).text(),
        source=required(f, "source", node).text(),
        compute_capability=optional(f, "compute_capability", Node.specifier),
        cache=optional(f, "cache", lambda n: n.choice(CACHES)) or "none",
        disable_arg=optional(f, "disable_arg", Node.text),
        cache_dir_variable=optional(f, "cache_dir_variable", Node.text),
        skip_variable=optional(f, "skip_variable", Node.text),
        skip_backends=skip_backends,
        skip_ops=skip_ops,
        managed_store=optional(f, "managed_store", Node.specifier),
    )


def _seconds(node: Node) -> float:
    value = node.scalar()
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise node.error(f"should be a number of seconds, got {node.kind()}") from None
    if isinstance(value, bool) or seconds <= 0:
        raise node.error("should be a positive number of seconds")
    return seconds


def _estimate(node: Node) -> Estimate:
    keys = ("id", "what", "module", "flashinfer", "compute_capability", "seconds",
            "seconds_each", "each", "conditions", "source")  # fmt: skip
    f = node.mapping(keys)
    if ("seconds" in f) == ("seconds_each" in f):
        raise node.error("gives exactly one of 'seconds' and 'seconds_each'")
    if "seconds_each" in f and "each" not in f:
        raise node.error("gives 'seconds_each' without 'each' (what one unit is)")
    return Estimate(
        id=required(f, "id", node).text(),
        what=required(f, "what", node).choice(ESTIMATES),
        flashinfer=required(f, "flashinfer", node).specifier(),
        compute_capability=_ccs(required(f, "compute_capability", node)),
        source=required(f, "source", node).text(),
        module=optional(f, "module", Node.text),
        seconds=optional(f, "seconds", _seconds),
        seconds_each=optional(f, "seconds_each", _seconds),
        each=optional(f, "each", Node.text),
        conditions=optional(f, "conditions", Node.text),
    )


__all__ = ["Autotune", "Estimate", "Kernels", "ProfileError", "Rules", "load", "parse"]
