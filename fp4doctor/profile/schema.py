"""Read a profile's YAML and validate it into `model.Profile`, naming file, line and key on error.

Reuse: `include: [flashinfer]` brings a shipped module's named `conditions` (profiles/common/),
so a rule stated once serves every engine that calls FlashInfer; each era after the first states
only what changes from the era before it (`_era`). Eras are checked for gaps and overlaps and
must reach `engine.newest_known`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from fp4doctor.profile import kinds
from fp4doctor.profile.kinds.base import VAR_RE, Requirement
from fp4doctor.profile.kinds.compute_capability import ComputeCapability
from fp4doctor.profile.knobs import KnobKind
from fp4doctor.profile.model import (
    EFFECT_WARN,
    EFFECTS,
    FAMILIES,
    FAMILIES_EVERY,
    FAMILIES_RUN,
    FAMILY_LINEAR,
    KNOB_KINDS,
    Advisory,
    AutoStep,
    Backend,
    Engine,
    Era,
    Knob,
    Modifier,
    Profile,
    Variable,
)
from fp4doctor.profile.yamlnode import Node, ProfileError, optional, required
from fp4doctor.versions import bounds, contains

SCHEMA = 1
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
CONFIG_FORMATS = ("vllm-yaml", "sglang-yaml", "trtllm-yaml", "dotenv")
MAX_BYTES = 1 << 20  # a profile is a page of rules, not a data set
MAX_DEPTH = 12
# libyaml's scanner and composer when present (several times faster); pure Python otherwise.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPENING = (yaml.BlockMappingStartToken, yaml.BlockSequenceStartToken,
            yaml.FlowMappingStartToken, yaml.FlowSequenceStartToken)  # fmt: skip
_CLOSING = (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)

Conditions = dict[str, tuple[Requirement, ...]]
# Loads a shipped module (profiles/common/NAME.yaml) by name: its named conditions.
ModuleLoader = Callable[[str], Conditions]


# --- requirements ------------------------------------------------------------------------------

_COMMON = ("id", "when", "when_absent", "fix", "source", "reason")


def _requirement(node: Node, named: Conditions) -> Requirement:
    fields = node.mapping()
    keys = [k for k in fields if k in kinds.KINDS]
    if len(keys) != 1:
        found = f"found {', '.join(keys)}" if keys else "found none"
        raise node.error(
            f"needs exactly one requirement kind ({found}; valid: {', '.join(kinds.KINDS)})"
        )
    kind_type = kinds.get(keys[0])
    node.mapping((kind_type.key, *kind_type.options, *_COMMON))  # unknown keys, with valid ones
    kind = kind_type.parse(fields[kind_type.key], fields, lambda n: _requirement(n, named), named)
    when: tuple[tuple[str, SpecifierSet], ...] = ()
    if "when" in fields:
        when = tuple((k, v.specifier()) for k, v in fields["when"].mapping().items())
    return Requirement(
        kind=kind,
        id=optional(fields, "id", Node.text) or kind.default_id(),
        when=when,
        when_absent=optional(fields, "when_absent", Node.boolean) or False,
        fix=optional(fields, "fix", Node.text),
        source=optional(fields, "source", Node.text),
        reason=optional(fields, "reason", Node.text),
        line=node.line,
    )


def _requirements(node: Node, named: Conditions) -> tuple[Requirement, ...]:
    return tuple(_requirement(n, named) for n in node.sequence())


def _conditions(node: Node, named: Conditions) -> Conditions:
    """Named requirement lists; each may `use:` the ones above it (and included modules')."""
    out = dict(named)
    for name, n in node.mapping().items():
        if not NAME_RE.match(name):
            raise n.error("condition names are lower-case letters, digits, '-', '_' and '.'")
        out[name] = _requirements(n, out)
    return out


def _advisory(node: Node, named: Conditions) -> Advisory:
    fields = node.mapping(("id", "if", "reason", "fix", "source", "effect"))
    return Advisory(
        id=required(fields, "id", node).text(),
        conditions=_requirements(required(fields, "if", node), named),
        reason=required(fields, "reason", node).text(),
        fix=optional(fields, "fix", Node.text),
        source=optional(fields, "source", Node.text),
        effect=optional(fields, "effect", lambda n: n.choice(EFFECTS)) or EFFECT_WARN,
    )


def _backend(name: str, node: Node, named: Conditions) -> Backend:
    if not NAME_RE.match(name):
        raise node.error("backend names are lower-case letters, digits, '-', '_' and '.'")
    fields = node.mapping(
        ("summary", "native", "family", "aliases", "smoke", "requires", "advisories")
    )
    requires = _requirements(fields["requires"], named) if "requires" in fields else ()
    seen: dict[str, Requirement] = {}
    for req in requires:
        other = seen.get(req.id)
        if other is not None and not (other.when and req.when):
            raise ProfileError(
                f"{node.file}:{req.line}: '{node.path}.requires' has two requirements with id "
                f"'{req.id}'; give one an 'id', or make both conditional with 'when'"
            )
        seen[req.id] = req
    return Backend(
        name=name,
        summary=required(fields, "summary", node).text(),
        native=required(fields, "native", node).boolean(),
        aliases=optional(fields, "aliases", Node.texts) or (),
        smoke=optional(fields, "smoke", Node.texts) or (),
        requires=requires,
        advisories=tuple(_advisory(n, named) for n in fields["advisories"].sequence())
        if "advisories" in fields
        else (),
        family=optional(fields, "family", lambda n: n.choice(FAMILIES)) or FAMILY_LINEAR,
    )


# --- eras and knobs ----------------------------------------------------------------------------

_KNOB_KEYS = (
    *KNOB_KINDS,
    "values",
    "also",
    "with_env",
    "with_args",
    "scalar",
    "type",
    "bool_style",
    "case_sensitive",
    "deprecated",
    "select",
    "note",
    "on_invalid",
    "source",
    "before",
    "no_kernel",
    "walk",
    "only_on",
)


def _knob(node: Node, backends: Mapping[str, Backend]) -> tuple[Knob, str | None]:
    """A knob, and the name of the inherited knob it goes before (`before:`), if any."""
    fields = node.mapping(_KNOB_KEYS)
    present = [k for k in KNOB_KINDS if k in fields]
    if len(present) != 1:
        raise node.error(f"needs exactly one of: {', '.join(KNOB_KINDS)}")
    kind = present[0]
    name = fields[kind].text()
    if kind == "env" and not VAR_RE.match(name):
        raise fields[kind].error(f"{name!r} is not a valid environment variable name")
    values_node = required(fields, "values", node)
    values: dict[str, tuple[str, ...]] = {}
    for backend, spellings in values_node.mapping().items():
        if backend not in backends:
            raise spellings.error(
                f"names no backend of this profile (valid: {', '.join(backends)})"
            )
        values[backend] = spellings.texts()
        if not values[backend]:
            raise spellings.error("should give at least one spelling")
    knob = Knob(
        kind=KnobKind(kind),
        name=name,
        values=values,
        type=optional(fields, "type", lambda n: n.choice(("choice", "bool"))) or "choice",
        bool_style=optional(fields, "bool_style", lambda n: n.choice(("int", "word"))) or "int",
        case_sensitive=optional(fields, "case_sensitive", Node.boolean) is not False,
        deprecated=optional(fields, "deprecated", Node.text),
        select=optional(fields, "select", Node.boolean) is not False,
        note=optional(fields, "note", Node.text),
        on_invalid=optional(fields, "on_invalid", Node.text),
        source=optional(fields, "source", Node.text),
        also=_also(fields.get("also"), kind),
        with_env=_with_env(fields.get("with_env"), values),
        with_args=_with_args(fields.get("with_args"), kind, values),
        scalar=_scalar(fields.get("scalar"), kind),
        only_on=_only_on(fields.get("only_on"), values),
    )
    if "no_kernel" in fields:
        values_given, then = _no_kernel(fields["no_kernel"], kind)
        knob = dataclasses.replace(knob, no_kernel=values_given, no_kernel_then=then)
    if optional(fields, "walk", Node.boolean):
        if kind != "cli":
            raise fields["walk"].error("only a cli knob walks the backends a value names")
        knob = dataclasses.replace(knob, walk=True)
    return knob, optional(fields, "before", Node.text)


def _no_kernel(node: Node, kind: str) -> tuple[tuple[str, ...], str]:
    """`no_kernel: {values: [...], then: auto|raises}`: values a CLI knob accepts that name no
    kernel of the family, and what the engine does with them."""
    if kind != "cli":
        raise node.error("only a cli knob has values that name no kernel")
    fields = node.mapping(("values", "then"))
    values = required(fields, "values", node).texts()
    then = required(fields, "then", node).choice(("auto", "raises"))
    return values, then


def _only_on(
    node: Node | None, values: Mapping[str, tuple[str, ...]]
) -> tuple[tuple[str, ComputeCapability], ...]:
    """`only_on: {backend: compute capabilities}`: the GPUs where the knob's spellings select
    that backend; elsewhere the same spelling selects the next backend that lists it."""
    if node is None:
        return ()
    out = []
    names = list(values)
    for backend, ccs in node.mapping().items():
        if backend not in values:
            raise ccs.error(f"names no value of this knob (valid: {', '.join(values)})")
        spellings = set(values[backend])
        if not any(spellings & set(values[b]) for b in names[names.index(backend) + 1 :]):
            raise ccs.error(
                "limits a backend whose spellings no later backend of `values` shares: on "
                "other GPUs the value would select nothing"
            )
        out.append((backend, _compute_capability(ccs)))
    return tuple(out)


def _compute_capability(node: Node) -> ComputeCapability:
    return cast(ComputeCapability, ComputeCapability.parse(node, {}, _no_child, {}))


def _no_child(node: Node) -> Requirement:
    raise node.error("a compute capability has no nested requirement")


def _scalar(node: Node | None, kind: str) -> bool:
    """`scalar: true`: a config key that takes one value, not a one-element list."""
    if node is None:
        return False
    if kind != "config":
        raise node.error("only a config knob can be scalar")
    return node.boolean()


def _also(node: Node | None, kind: str) -> tuple[tuple[str, str], ...]:
    """`also: {VAR: value}`: variables an env knob is read only with."""
    if node is None:
        return ()
    if kind != "env":
        raise node.error("only an env knob can need other variables set with it")
    out = []
    for name, value in node.mapping().items():
        if not VAR_RE.match(name):
            raise value.error(f"{name!r} is not a valid environment variable name")
        out.append((name, value.text()))
    return tuple(out)


def _with_env(
    node: Node | None, values: Mapping[str, tuple[str, ...]]
) -> tuple[tuple[str, str, str], ...]:
    """`with_env: {backend: {VAR: value}}`: variables written with the knob for that backend."""
    return _per_backend(node, values, lambda name: bool(VAR_RE.match(name)),
                        "is not a valid environment variable name")  # fmt: skip


def _with_args(
    node: Node | None, kind: str, values: Mapping[str, tuple[str, ...]]
) -> tuple[tuple[str, str, str], ...]:
    """`with_args: {backend: {--flag: value}}`: flags a CLI knob is written with for that
    backend."""
    if node is not None and kind != "cli":
        raise node.error("only a cli knob can be written with other flags")
    return _per_backend(node, values, lambda name: name.startswith("--"),
                        "is not a command-line flag (--name)")  # fmt: skip


def _per_backend(
    node: Node | None,
    values: Mapping[str, tuple[str, ...]],
    valid: Callable[[str], bool],
    invalid: str,
) -> tuple[tuple[str, str, str], ...]:
    """`{backend: {name: value}}` for backends the knob selects, each name `valid`:
    (backend, name, value) in order."""
    if node is None:
        return ()
    out = []
    for backend, settings in node.mapping().items():
        if backend not in values:
            raise settings.error(f"names no value of this knob (valid: {', '.join(values)})")
        for name, value in settings.mapping().items():
            if not valid(name):
                raise value.error(f"{name!r} {invalid}")
            out.append((backend, name, value.text()))
    return tuple(out)


def _auto_step(node: Node, backends: Mapping[str, Backend], named: Conditions) -> AutoStep:
    fields = node.mapping(("backend", "if"))
    backend_node = required(fields, "backend", node)
    backend = backend_node.text()
    if backend not in backends:
        raise backend_node.error(f"names no backend of this profile (valid: {', '.join(backends)})")
    conditions = _requirements(fields["if"], named) if "if" in fields else ()
    return AutoStep(backend=backend, conditions=conditions)


def _merge_knobs(
    knob_nodes: list[Node], inherited: tuple[Knob, ...], backends: Mapping[str, Backend]
) -> tuple[Knob, ...]:
    """The era's knobs, highest precedence first: the inherited ones, with each knob given here
    replacing the one of the same name in place; a new name goes before the knob its
    `before:` names, or last."""
    merged = list(inherited)
    for knob_node in knob_nodes:
        knob, before = _knob(knob_node, backends)
        at = next((i for i, k in enumerate(merged) if k.name == knob.name), None)
        if at is not None:
            if before is not None:
                raise knob_node.error("'before' places a new knob; this one replaces a knob")
            merged[at] = knob
        elif before is None:
            merged.append(knob)
        else:
            place = next((i for i, k in enumerate(merged) if k.name == before), None)
            if place is None:
                raise knob_node.error(f"'before: {before}' names no knob of this era")
            merged.insert(place, knob)
    return tuple(merged)


def _modifier(node: Node, backends: Mapping[str, Backend]) -> Modifier:
    """`{env: VAR, disables: {backend: NAME}}` or `{env: VAR, values: [...], replaces:
    {backend: backend}}` (model.Modifier)."""
    fields = node.mapping(("env", "disables", "values", "replaces", "source"))
    name = required(fields, "env", node).text()
    if not VAR_RE.match(name):
        raise fields["env"].error(f"{name!r} is not a valid environment variable name")
    if ("disables" in fields) == ("replaces" in fields):
        raise node.error("needs exactly one of: disables, replaces")
    if ("replaces" in fields) != ("values" in fields):
        raise node.error("'replaces' needs 'values' (the spellings that turn it on), and only it")

    def backend(n: Node) -> str:
        if n.text() not in backends:
            raise n.error(f"names no backend of this profile (valid: {', '.join(backends)})")
        return n.text()

    def named(key: str) -> dict[str, Node]:
        found = fields[key].mapping() if key in fields else {}
        for b in found:
            if b not in backends:
                raise found[b].error(
                    f"names no backend of this profile (valid: {', '.join(backends)})"
                )
        return found

    return Modifier(
        env=name,
        disables={b: n.text() for b, n in named("disables").items()},
        values=fields["values"].texts() if "values" in fields else (),
        replaces={b: backend(n) for b, n in named("replaces").items()},
        source=optional(fields, "source", Node.text),
    )


_FAMILY_KEYS = ("knobs", "drop", "auto", "conflicts", "reads", "modifiers", "note", "source")
_OTHER_FAMILIES = tuple(f for f in FAMILIES if f != FAMILY_LINEAR)
_ERA_KEYS = ("versions", *_FAMILY_KEYS, *_OTHER_FAMILIES)


def _era(
    node: Node, backends: Mapping[str, Backend], named: Conditions, previous: Era | None
) -> Era:
    """One era: its own keys are the linear family's; a key named after another family (`moe:`)
    holds that family's knobs and automatic order, which inherit from that family's block in
    the eras before (the first block of a family states its `auto`)."""
    fields = node.mapping(_ERA_KEYS)
    versions = required(fields, "versions", node).specifier()
    linear = {n: b for n, b in backends.items() if b.family == FAMILY_LINEAR}
    era = _era_body(fields, node, linear, named, previous, versions)
    families: list[tuple[str, Era]] = []
    for family in _OTHER_FAMILIES:
        before = previous.of_family(family) if previous is not None else None
        own = {n: b for n, b in backends.items() if b.family == family}
        if family in fields:
            sub_node = fields[family]
            sub = _era_body(sub_node.mapping(_FAMILY_KEYS), sub_node, own, named, before, versions)
            families.append((family, dataclasses.replace(sub, line=sub_node.line)))
        elif before is not None:
            families.append((family, dataclasses.replace(before, versions=versions, note=None)))
    return dataclasses.replace(era, families=tuple(families))


def _era_body(
    fields: Mapping[str, Node],
    node: Node,
    backends: Mapping[str, Backend],
    named: Conditions,
    previous: Era | None,
    versions: SpecifierSet,
) -> Era:
    """One family's part of an era. After the first, `knobs`, `auto`, `conflicts`, `reads` and
    `modifiers` default to the era before's: `knobs` lists only the knobs that change or arrive
    (`drop` names those removed), `auto`, `conflicts`, `reads` and `modifiers` replace the
    inherited list when given. `note` and `source` are the era's own."""
    if previous is None and "drop" in fields:
        raise fields["drop"].error("the first era has no knobs to drop")
    if previous is None and "auto" not in fields:
        raise node.error("is missing the required key 'auto' (the first era states it)")
    base = previous or Era(versions=SpecifierSet(), knobs=(), auto=())
    inherited = base.knobs
    if "drop" in fields:
        names = [k.name for k in inherited]
        drop_nodes = fields["drop"].sequence()
        for n in drop_nodes:
            if n.text() not in names:
                raise n.error(f"drops no knob of the era before (valid: {', '.join(names)})")
        inherited = tuple(k for k in inherited if k.name not in {n.text() for n in drop_nodes})
    knob_nodes = fields["knobs"].sequence() if "knobs" in fields else []
    auto = fields.get("auto")
    return Era(
        versions=versions,
        knobs=_merge_knobs(knob_nodes, inherited, backends),
        auto=tuple(_auto_step(n, backends, named) for n in auto.sequence()) if auto else base.auto,
        conflicts=fields["conflicts"].texts() if "conflicts" in fields else base.conflicts,
        reads=fields["reads"].texts() if "reads" in fields else base.reads,
        modifiers=(
            tuple(_modifier(n, backends) for n in fields["modifiers"].sequence())
            if "modifiers" in fields
            else base.modifiers
        ),
        note=optional(fields, "note", Node.text),
        source=optional(fields, "source", Node.text),
        line=node.line,
    )


def _check_eras(eras: tuple[Era, ...], eras_node: Node, newest_known: str) -> None:
    """Eras in order, with no gap and no overlap, and the last reaching `newest_known`."""
    nodes = eras_node.sequence()
    previous_upper: Version | None = None
    for i, (era, n) in enumerate(zip(eras, nodes, strict=True)):
        where = n.mapping()["versions"]
        try:
            lower, upper = bounds(era.versions)
        except ValueError as exc:
            raise where.error(str(exc)) from None
        if i > 0 and (lower is None or previous_upper is None or lower != previous_upper):
            before = f"<{previous_upper}" if previous_upper else "open-ended"
            raise where.error(
                f"does not start where the era before ends ({before}): eras must leave no "
                f"gap and not overlap (start this one at '>={previous_upper}')"
            )
        if lower is not None and upper is not None and upper <= lower:
            raise where.error("is empty: its upper bound is not above its lower bound")
        previous_upper = upper
    if previous_upper is not None and not contains(eras[-1].versions, newest_known):
        raise (
            nodes[-1]
            .mapping()["versions"]
            .error(f"ends below engine.newest_known {newest_known}: the eras must cover it")
        )


# --- the whole profile -------------------------------------------------------------------------

_PROFILE_KEYS = (
    "schema",
    "target",
    "title",
    "engine",
    "source",
    "include",
    "conditions",
    "backends",
    "eras",
    "variables",
)


def compose(text: str, file: str) -> Node:
    """The one YAML document of `text` as a Node tree, refusing what is unsafe to walk."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ProfileError(f"{file}: larger than {MAX_BYTES} bytes; a profile is a page of rules")
    _check_depth(text, file)
    try:
        nodes = list(yaml.compose_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        raise _invalid(exc, file) from None
    if len(nodes) != 1 or nodes[0] is None:
        raise ProfileError(f"{file}: should hold exactly one YAML document")
    _walk(nodes[0], file)
    return Node(nodes[0], "", file)


def _walk(root: yaml.Node, file: str) -> None:
    """One pass over the composed tree (iteratively: no recursion) that refuses aliases and
    nesting deeper than MAX_DEPTH; an alias is said first, whatever else is wrong."""
    # An alias shows up as the very same node object twice in the tree. A tree of aliases (a
    # "billion laughs") is exponential to walk: the walk ends at the first node seen again.
    seen: set[int] = set()
    too_deep: ProfileError | None = None
    stack: list[tuple[yaml.Node, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            raise ProfileError(f"{file}: YAML anchors and aliases are not allowed in profiles")
        seen.add(id(node))
        if depth > MAX_DEPTH and too_deep is None:
            line = node.start_mark.line + 1
            too_deep = ProfileError(f"{file}:{line}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
    if too_deep is not None:
        raise too_deep


def _check_schema(fields: Mapping[str, Node], root: Node) -> None:
    schema_node = required(fields, "schema", root)
    schema = schema_node.integer()
    if schema != SCHEMA:
        raise schema_node.error(f"is {schema}; this fp4doctor reads schema {SCHEMA}")


def parse_module(text: str, file: str) -> Conditions:
    """A shared module (profiles/common/NAME.yaml): `schema`, `module`, `source`, `conditions`."""
    root = compose(text, file)
    fields = root.mapping(("schema", "module", "source", "conditions"))
    _check_schema(fields, root)
    required(fields, "module", root).text()
    return _conditions(required(fields, "conditions", root), {})


def parse(
    text: str,
    file: str,
    modules: ModuleLoader | None = None,
    known: Callable[[str], str | None] | None = None,
    unavailable: Callable[[str], dict[str, str]] | None = None,
) -> Profile:
    """Validate profile YAML text; raise ProfileError naming file, line and key. `known` gives
    an engine package's newest release in the extracted data (profiles/releases.yaml), used
    when the profile does not state `engine.newest_known` (the shipped ones never do);
    `unavailable` the engine's releases whose FlashInfer pin the package index lacks."""
    root = compose(text, file)
    fields = root.mapping(_PROFILE_KEYS)
    _check_schema(fields, root)
    target_node = required(fields, "target", root)
    target = target_node.text()
    if not NAME_RE.match(target):
        raise target_node.error("should be a lower-case name like 'vllm'")

    engine_node = required(fields, "engine", root)
    ef = engine_node.mapping(
        (
            "package",
            "newest_known",
            "args_variable",
            "config_format",
            "config_from",
            "config_source",
            "families",
            "requires",
        )
    )
    args_variable = optional(ef, "args_variable", Node.text)
    if args_variable is not None and not VAR_RE.match(args_variable):
        raise ef["args_variable"].error(f"{args_variable!r} is not a valid variable name")
    package = required(ef, "package", engine_node).text()
    newest_known = optional(ef, "newest_known", Node.version)
    if newest_known is None:
        newest_known = known(package) if known is not None else None
    if newest_known is None:
        raise engine_node.error(
            f"should give newest_known: the release data (profiles/releases.yaml) names no "
            f"release of {package}"
        )
    engine = Engine(
        package=package,
        newest_known=newest_known,
        args_variable=args_variable,
        config_format=optional(ef, "config_format", lambda n: n.choice(CONFIG_FORMATS)) or "dotenv",
        config_from=optional(ef, "config_from", Node.version),
        config_source=optional(ef, "config_source", Node.text),
        families=optional(ef, "families", lambda n: n.choice(FAMILIES_RUN)) or FAMILIES_EVERY,
    )

    named: Conditions = {}
    includes = optional(fields, "include", Node.texts) or ()
    for i, name in enumerate(includes):
        where = fields["include"].sequence()[i] if len(includes) > 1 else fields["include"]
        if modules is None:
            raise where.error("includes a module, but no shipped modules are available here")
        try:
            named.update(modules(name))
        except KeyError as exc:
            raise where.error(str(exc.args[0])) from None
    if "conditions" in fields:
        named = _conditions(fields["conditions"], named)

    if "requires" in ef:
        engine = dataclasses.replace(engine, requires=_requirements(ef["requires"], named))

    backends_node = required(fields, "backends", root)
    backends = {name: _backend(name, n, named) for name, n in backends_node.mapping().items()}
    if not backends:
        raise backends_node.error("should declare at least one backend")
    # A name or alias means one backend of its family; across families it may repeat
    # (`--prefer cutlass` means the linear and the MoE CUTLASS backend at once).
    names: dict[tuple[str, str], str] = {}
    for b in backends.values():
        for name in (b.name, *b.aliases):
            key = (b.family, name)
            other = backends.get(name)
            clash = names.get(key) or (other.name if other and other.family == b.family else None)
            if clash is not None and clash != b.name:
                raise backends_node.error(f"name or alias '{name}' is used by two backends")
            names[key] = b.name

    eras_node = required(fields, "eras", root)
    eras: list[Era] = []
    for n in eras_node.sequence():
        eras.append(_era(n, backends, named, eras[-1] if eras else None))
    if not eras:
        raise eras_node.error("should list at least one era")
    _check_eras(tuple(eras), eras_node, engine.newest_known)

    variables = {}
    if "variables" in fields:
        for name, n in fields["variables"].mapping().items():
            if not VAR_RE.match(name):
                raise n.error("is not a valid environment variable name")
            vf = n.mapping(("note", "means", "family", "removed"))
            means = optional(vf, "means", Node.text)
            if means is not None and means not in backends:
                raise vf["means"].error(
                    f"names no backend of this profile (valid: {', '.join(backends)})"
                )
            family = optional(vf, "family", lambda n: n.choice(FAMILIES))
            if means is not None and family is not None and backends[means].family != family:
                raise vf["family"].error(f"contradicts 'means: {means}' (a {means} variable)")
            variables[name] = Variable(
                name=name,
                note=required(vf, "note", n).text(),
                means=means,
                family=family or (backends[means].family if means else FAMILY_LINEAR),
                removed=optional(vf, "removed", Node.specifier),
            )

    parsed = Profile(
        target=target,
        title=required(fields, "title", root).text(),
        engine=engine,
        backends=backends,
        eras=tuple(eras),
        variables=variables,
        includes=includes,
        source=optional(fields, "source", Node.text),
        path=file,
    )
    read = {engine.package: engine.newest_known}
    if known is not None:
        for name in sorted(parsed.packages() - {engine.package}):
            if (version := known(name)) is not None:
                read[name] = version
    gaps = tuple(sorted(unavailable(engine.package).items())) if unavailable else ()
    engine = dataclasses.replace(
        engine, newest_read=tuple(sorted(read.items())), unavailable_pins=gaps
    )
    return dataclasses.replace(parsed, engine=engine)


# Nesting no deeper than this cannot crash libyaml's recursive composer (it took ~50,000 levels
# here); text whose every way of nesting stays under it needs no token scan first.
_SHALLOW = 1000
_DASHES = re.compile(r"^(?:[ \t]*-[ \t]+)+", re.M)
_INDENT = re.compile(r"^[ \t]*", re.M)


def _could_be_deep(text: str) -> bool:
    """An upper bound on the nesting depth is over _SHALLOW: flow brackets, plus the deepest
    indentation, plus the most sequence dashes on one line."""
    brackets = text.count("[") + text.count("{")
    indent = max((len(m) for m in _INDENT.findall(text)), default=0)
    dashes = max((m.count("-") for m in _DASHES.findall(text)), default=0)
    return brackets + indent + dashes > _SHALLOW


def _check_depth(text: str, file: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH from the token stream, before anything recursive
    (libyaml's composer recurses per level and can crash the process on deep input). Text that
    cannot nest that deep is composed first and measured on its nodes (`_walk`), which
    is several times faster."""
    if not _could_be_deep(text):
        return
    depth = 0
    try:
        for token in yaml.scan(text, Loader=_LOADER):
            if isinstance(token, _OPENING):
                depth += 1
                if depth > MAX_DEPTH:
                    line = token.start_mark.line + 1
                    raise ProfileError(f"{file}:{line}: nested deeper than {MAX_DEPTH} levels")
            elif isinstance(token, _CLOSING):
                depth -= 1
    except yaml.YAMLError as exc:
        raise _invalid(exc, file) from None


def _invalid(exc: yaml.YAMLError, file: str) -> ProfileError:
    """YAML the parser refuses, with the line where it can tell."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        return ProfileError(f"{file}{line}: not valid YAML: {exc.problem or exc}")
    return ProfileError(f"{file}: not valid YAML: {exc}")


def module_path(directory: Path, name: str) -> Path:
    return directory / "common" / f"{name}.yaml"
