"""The shape rules of `profiles/shapes.yaml`, as typed data: per-rank alignments each backend
needs, the checkpoint formats each engine release reads, the weight-only kernels, and what each
release does with a defect of the checkpoint's content (`content`: fp4doctor/checkpoint/
content_rules.py).

Parsed with the profile machinery (`fp4doctor.profile.yamlnode`), so a malformed entry is
refused with its file, line and key, and unknown keys are errors.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

from fp4doctor.checkpoint import content_rules
from fp4doctor.checkpoint.activation import ACTIVATIONS
from fp4doctor.checkpoint.content_rules import ContentRule
from fp4doctor.checkpoint.layers import FAMILY_LINEAR, FAMILY_MOE
from fp4doctor.checkpoint.quant import FORMATS
from fp4doctor.profile import builtin_dir
from fp4doctor.profile.yamlnode import Node, ProfileError, optional, required
from fp4doctor.textfile import read_text
from fp4doctor.versions import contains

DIMS = ("n", "k", "intermediate")
EFFECTS = ("load-error", "wrong-output", "fails")
FAMILIES = (FAMILY_LINEAR, FAMILY_MOE)


@dataclass(frozen=True)
class Alignment:
    """A per-rank size a backend needs: `dim` a multiple of `multiple` (after the engine pads it
    up to `padded_to`, when it does)."""

    id: str
    target: str
    engine: SpecifierSet
    family: str
    dims: tuple[str, ...]
    multiple: int
    effect: str
    reason: str
    source: str
    backends: tuple[str, ...] = ()  # empty: every backend of the family
    formats: tuple[str, ...] = ()  # empty: every format
    padded_to: int = 0
    unverified: str | None = None
    gated: bool = False  # MoE: only when the experts' activation is gated (gate and up fused)
    # False: the upper bound of `engine` is where reading stopped, not the release that fixed it
    upper_is_fix: bool = True

    def applies(
        self, target: str, version: str, family: str, fmt: str, gated: bool | None = None
    ) -> bool:
        return (
            self.target == target
            and self.family == family
            and (not self.formats or fmt in self.formats)
            and (not self.gated or gated is not False)
            and contains(self.engine, version) is True
        )

    def holds(self, value: int) -> bool:
        padded = -(-value // self.padded_to) * self.padded_to if self.padded_to else value
        return padded % self.multiple == 0


@dataclass(frozen=True)
class FormatSupport:
    """Releases of an engine that read a checkpoint format (for one family, or all)."""

    target: str
    format: str
    engine: SpecifierSet
    source: str
    family: str | None = None


@dataclass(frozen=True)
class PickStep:
    """One step of an engine's own choice for weight-only layers: `backend` when the GPUs'
    compute capability is one of `compute_capability` (empty: any) and it is supported here;
    `forced`: taken whether or not it is supported (the engine then raises at load)."""

    backend: str
    compute_capability: tuple[int, ...] = ()  # CC x 10 (90, 100, 103)
    forced: bool = False


@dataclass(frozen=True)
class WeightOnly:
    """The backends an engine release runs weight-only (W4A16) layers of one family on, and
    (`pick`) the engine's own choice among them; no `pick`: its family's automatic order."""

    target: str
    engine: SpecifierSet
    backends: tuple[str, ...]
    source: str
    family: str = FAMILY_LINEAR
    pick: tuple[PickStep, ...] = ()
    unverified: str | None = None
    formats: tuple[str, ...] = ()  # the checkpoint formats it is for (empty: every one)

    @property
    def cited(self) -> str:
        """The source, with what was not verified."""
        return self.source + (f" (unverified: {self.unverified})" if self.unverified else "")


@dataclass(frozen=True)
class ActivationSupport:
    """The MoE activations some backends of an engine release run, and whether they apply a
    SwiGLU clamp (`swiglu_limit`). A model whose activation is not listed, or that sets a clamp
    a backend does not apply, cannot run on it; `engine_skips`: the engine's automatic choice
    passes over such a backend by itself (it raises only when the backend is asked for)."""

    id: str
    target: str
    engine: SpecifierSet
    backends: tuple[str, ...]
    activations: tuple[str, ...]
    clamp: bool
    error: str  # what the engine raises when the backend is asked for an activation it lacks
    source: str
    clamp_error: str | None = None  # and for a clamp it does not apply (clamp: false)
    engine_skips: bool = True
    unverified: str | None = None

    def applies(self, target: str, version: str, backend: str) -> bool:
        return (
            self.target == target
            and backend in self.backends
            and contains(self.engine, version) is True
        )


@dataclass(frozen=True)
class ShapeRules:
    alignments: tuple[Alignment, ...]
    formats: tuple[FormatSupport, ...]
    weight_only: tuple[WeightOnly, ...]
    activations: tuple[ActivationSupport, ...] = ()
    content: tuple[ContentRule, ...] = ()

    def activation_rules(self, target: str, version: str) -> list[ActivationSupport]:
        return [
            a for a in self.activations
            if a.target == target and contains(a.engine, version) is True
        ]  # fmt: skip

    def supported(self, target: str, version: str, fmt: str, family: str) -> FormatSupport | None:
        """The entry that rules out `fmt` for `family` at this release, if one does: None when
        it is read (or when the file says nothing about it)."""
        rows = [
            r for r in self.formats
            if r.target == target and r.format == fmt and r.family in (None, family)
        ]  # fmt: skip
        if not rows or any(contains(r.engine, version) is True for r in rows):
            return None
        return rows[0]

    def weight_only_backends(
        self, target: str, version: str, family: str = FAMILY_LINEAR, fmt: str | None = None
    ) -> WeightOnly | None:
        """The weight-only kernels of `family` at this release for a checkpoint of format `fmt`
        (None: not known). An entry that names formats is for those only (SGLang runs ModelOpt
        and compressed-tensors W4A16 layers through different methods)."""
        return next(
            (w for w in self.weight_only
             if w.target == target and w.family == family and contains(w.engine, version) is True
             and (not w.formats or fmt in w.formats)),
            None,
        )  # fmt: skip


def default_path() -> Path:
    return builtin_dir() / "shapes.yaml"


@functools.lru_cache(maxsize=4)
def load(path: str | None = None) -> ShapeRules:
    """The shape rules (the shipped file unless `path`); a ProfileError names file, line, key."""
    from fp4doctor.profile.schema import compose

    file = Path(path) if path else default_path()
    root = compose(read_text(file), str(file))
    fields = root.mapping(
        ("schema", "alignments", "formats", "weight_only", "activations", "content")
    )
    if required(fields, "schema", root).integer() != 1:
        raise fields["schema"].error("should be 1 (the schema this fp4doctor reads)")
    aligns = tuple(_alignment(n) for n in _seq(fields, "alignments"))
    ids = [a.id for a in aligns]
    for node, a in zip(_seq(fields, "alignments"), aligns, strict=True):
        if ids.count(a.id) > 1:
            raise node.error(f"id {a.id!r} is given twice")
    acts = tuple(_activation(n) for n in _seq(fields, "activations"))
    seen: dict[str, str] = {a.id: "alignments" for a in aligns}
    for node, act in zip(_seq(fields, "activations"), acts, strict=True):
        if act.id in seen:
            raise node.error(f"id {act.id!r} is given twice")
        seen[act.id] = "activations"
    _no_overlap(fields, acts)
    content = tuple(content_rules.parse(n) for n in _seq(fields, "content"))
    for node, rule in zip(_seq(fields, "content"), content, strict=True):
        if rule.id in seen:
            raise node.error(f"id {rule.id!r} is given twice")
        seen[rule.id] = "content"
    return ShapeRules(
        aligns,
        tuple(_format(n) for n in _seq(fields, "formats")),
        tuple(_weight_only(n) for n in _seq(fields, "weight_only")),
        acts,
        content,
    )


def _seq(fields: dict[str, Node], key: str) -> list[Node]:
    return fields[key].sequence() if key in fields else []


def _positive(node: Node) -> int:
    value = node.integer()
    if value <= 0:
        raise node.error("should be a positive whole number")
    return value


def _alignment(node: Node) -> Alignment:
    known = ("id", "target", "engine", "family", "formats", "backends", "dim", "multiple",
             "padded_to", "effect", "reason", "source", "unverified", "gated",
             "upper_is_fix")  # fmt: skip
    f = node.mapping(known)
    dims = required(f, "dim", node).texts()
    for d in dims:
        if d not in DIMS:
            raise f["dim"].error(f"{d!r} is not one of: {', '.join(DIMS)}")
    formats = optional(f, "formats", Node.texts) or ()
    for fmt in formats:
        if fmt not in FORMATS:
            raise f["formats"].error(f"{fmt!r} is not one of: {', '.join(FORMATS)}")
    return Alignment(
        id=required(f, "id", node).text(),
        target=required(f, "target", node).text(),
        engine=required(f, "engine", node).specifier(),
        family=required(f, "family", node).choice(FAMILIES),
        dims=dims,
        multiple=_positive(required(f, "multiple", node)),
        effect=required(f, "effect", node).choice(EFFECTS),
        reason=required(f, "reason", node).text(),
        source=required(f, "source", node).text(),
        backends=optional(f, "backends", Node.texts) or (),
        formats=formats,
        padded_to=optional(f, "padded_to", _positive) or 0,
        unverified=optional(f, "unverified", Node.text),
        gated=bool(optional(f, "gated", Node.boolean)),
        upper_is_fix=optional(f, "upper_is_fix", Node.boolean) is not False,
    )


def _activation(node: Node) -> ActivationSupport:
    known = ("id", "target", "engine", "backends", "activations", "clamp", "error",
             "clamp_error", "source", "engine_skips", "unverified")  # fmt: skip
    f = node.mapping(known)
    acts = required(f, "activations", node).texts()
    for a in acts:
        if a not in ACTIVATIONS:
            raise f["activations"].error(f"{a!r} is not one of: {', '.join(ACTIVATIONS)}")
    skips = optional(f, "engine_skips", Node.boolean)
    clamp = required(f, "clamp", node).boolean()
    clamp_error = optional(f, "clamp_error", Node.text)
    if not clamp and clamp_error is None:
        raise node.error("'clamp_error' is required when 'clamp' is false (what the engine says)")
    return ActivationSupport(
        id=required(f, "id", node).text(),
        target=required(f, "target", node).text(),
        engine=required(f, "engine", node).specifier(),
        backends=required(f, "backends", node).texts(),
        activations=acts,
        clamp=clamp,
        error=required(f, "error", node).text(),
        clamp_error=clamp_error,
        source=required(f, "source", node).text(),
        engine_skips=True if skips is None else skips,
        unverified=optional(f, "unverified", Node.text),
    )


def _no_overlap(fields: dict[str, Node], acts: tuple[ActivationSupport, ...]) -> None:
    """Two entries may not both speak for one backend of one release: which would hold?"""
    nodes = _seq(fields, "activations")
    for i, a in enumerate(acts):
        for b in acts[:i]:
            shared = set(a.backends) & set(b.backends)
            if a.target != b.target or not shared:
                continue
            overlap = a.engine & b.engine
            # Two ranges overlap when a version bound of either lies in both.
            probes = [s.version for s in (*a.engine, *b.engine)]
            if any(contains(overlap, v) is True for v in probes):
                raise nodes[i].error(
                    f"{a.id!r} and {b.id!r} both cover {sorted(shared)[0]} for some release"
                )


def _format(node: Node) -> FormatSupport:
    f = node.mapping(("target", "format", "family", "engine", "source"))
    return FormatSupport(
        target=required(f, "target", node).text(),
        format=required(f, "format", node).choice(FORMATS),
        engine=required(f, "engine", node).specifier(),
        source=required(f, "source", node).text(),
        family=optional(f, "family", lambda n: n.choice(FAMILIES)),
    )


def _weight_only(node: Node) -> WeightOnly:
    known = ("target", "family", "engine", "formats", "backends", "pick", "source", "unverified")
    f = node.mapping(known)
    backends = required(f, "backends", node).texts()
    formats = optional(f, "formats", Node.texts) or ()
    for fmt in formats:
        if fmt not in FORMATS:
            raise f["formats"].error(f"{fmt!r} is not one of: {', '.join(FORMATS)}")
    steps = tuple(_pick_step(n) for n in (f["pick"].sequence() if "pick" in f else []))
    for n, step in zip(f["pick"].sequence() if "pick" in f else [], steps, strict=True):
        if step.backend not in backends:
            raise n.error(f"{step.backend!r} is not one of this entry's backends")
    return WeightOnly(
        target=required(f, "target", node).text(),
        engine=required(f, "engine", node).specifier(),
        backends=backends,
        source=required(f, "source", node).text(),
        family=optional(f, "family", lambda n: n.choice(FAMILIES)) or FAMILY_LINEAR,
        pick=steps,
        unverified=optional(f, "unverified", Node.text),
        formats=tuple(formats),
    )


def _pick_step(node: Node) -> PickStep:
    f = node.mapping(("backend", "compute_capability", "forced"))
    ccs = f["compute_capability"].sequence() if "compute_capability" in f else []
    return PickStep(
        backend=required(f, "backend", node).text(),
        compute_capability=tuple(_positive(n) for n in ccs),
        forced=bool(optional(f, "forced", Node.boolean)),
    )


__all__ = [
    "ActivationSupport",
    "Alignment",
    "FormatSupport",
    "PickStep",
    "ProfileError",
    "ShapeRules",
    "WeightOnly",
    "load",
]
