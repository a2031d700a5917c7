"""Read a profile's YAML and validate it into `model.Profile`, naming file, line and key on error.

The YAML is composed into nodes (never constructed into arbitrary objects: only the safe
loader's plain scalars), so every error can point at the line it comes from.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from fp4doctor.profile.model import (
    KNOB_KINDS,
    Advisory,
    AutoStep,
    Backend,
    Engine,
    Era,
    Knob,
    Profile,
    Requirement,
    Variable,
)

SCHEMA = 1
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
REQUIREMENT_KINDS = (
    "package",
    "compute_capability",
    "cudnn_backend",
    "cuda_runtime",
    "cuda_driver",
    "nvcc",
    "ninja",
    "same_version",
    "env",
    "any_of",
    "all_of",
    "use",
)
CONFIG_FORMATS = ("vllm-yaml", "trtllm-yaml", "dotenv")
MAX_BYTES = 1 << 20  # a profile is a page of rules, not a data set
MAX_DEPTH = 12
# libyaml's composer when present (several times faster); the pure-Python one otherwise.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ProfileError(Exception):
    """A profile that cannot be used; the message names the file, line and key."""


T = TypeVar("T")


class _Node:
    """A YAML node with its file, line and dotted key path, and typed accessors."""

    def __init__(self, node: yaml.Node, path: str, file: str) -> None:
        self.node = node
        self.path = path
        self.file = file

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def error(self, message: str) -> ProfileError:
        where = f" '{self.path}'" if self.path else ""
        return ProfileError(f"{self.file}:{self.line}:{where} {message}")

    def kind(self) -> str:
        if isinstance(self.node, yaml.MappingNode):
            return "a mapping"
        if isinstance(self.node, yaml.SequenceNode):
            return "a list"
        value = self.scalar()
        if value is None:
            return "nothing (null)"
        return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
            type(value), "a value"
        )

    def scalar(self) -> Any:
        node = self.node
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(f"should be a single value, got {self.kind()}")
        tag = node.tag
        if tag == "tag:yaml.org,2002:null":
            return None
        if tag == "tag:yaml.org,2002:bool":
            return node.value.lower() in ("true", "yes", "on")
        if tag == "tag:yaml.org,2002:int":
            try:
                return int(node.value.replace("_", ""), 0)
            except ValueError:
                return node.value
        if tag == "tag:yaml.org,2002:float":
            return node.value  # kept as text: versions like 9.10 must not become 9.1
        if tag == "tag:yaml.org,2002:str":
            return node.value
        raise self.error(f"has an unsupported YAML tag {tag!r}")

    def mapping(self, known: tuple[str, ...] | None = None) -> dict[str, _Node]:
        if not isinstance(self.node, yaml.MappingNode):
            raise self.error(f"should be a mapping, got {self.kind()}")
        out: dict[str, _Node] = {}
        for key_node, value_node in self.node.value:
            key = _Node(key_node, self.path, self.file).scalar()
            if not isinstance(key, str):
                key = str(key)
            child = _Node(value_node, f"{self.path}.{key}" if self.path else key, self.file)
            if key in out:
                raise child.error("is given twice")
            if known is not None and key not in known:
                raise child.error(f"is not a known key here (valid: {', '.join(known)})")
            out[key] = child
        return out

    def sequence(self) -> list[_Node]:
        if not isinstance(self.node, yaml.SequenceNode):
            raise self.error(f"should be a list, got {self.kind()}")
        return [_Node(n, f"{self.path}[{i}]", self.file) for i, n in enumerate(self.node.value)]

    def text(self) -> str:
        value = self.scalar()
        if isinstance(value, bool) or value is None:
            raise self.error(f"should be text, got {self.kind()}")
        return str(value)

    def boolean(self) -> bool:
        value = self.scalar()
        if not isinstance(value, bool):
            raise self.error(f"should be true or false, got {self.kind()}")
        return value

    def integer(self) -> int:
        value = self.scalar()
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(f"should be a whole number, got {self.kind()}")
        return value

    def choice(self, choices: tuple[str, ...]) -> str:
        value = self.text()
        if value not in choices:
            raise self.error(f"is {value!r}, which is not one of: {', '.join(choices)}")
        return value

    def specifier(self) -> SpecifierSet:
        value = self.text()
        try:
            return SpecifierSet(value)
        except InvalidSpecifier:
            raise self.error(
                f"{value!r} is not a PEP 440 version specifier (e.g. '>=1.13' or '>=0.11.1,<0.15')"
            ) from None

    def version(self) -> str:
        value = self.text()
        try:
            Version(value)
        except InvalidVersion:
            raise self.error(f"{value!r} is not a version (e.g. '0.33.0')") from None
        return value

    def texts(self) -> tuple[str, ...]:
        if isinstance(self.node, yaml.ScalarNode):
            return (self.text(),)
        return tuple(n.text() for n in self.sequence())


def _required(fields: dict[str, _Node], key: str, parent: _Node) -> _Node:
    if key not in fields:
        raise parent.error(f"is missing the required key '{key}'")
    return fields[key]


def _opt(fields: dict[str, _Node], key: str, read: Callable[[_Node], T]) -> T | None:
    return read(fields[key]) if key in fields else None


def _check_depth(node: yaml.Node, file: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        line = node.start_mark.line + 1
        raise ProfileError(f"{file}:{line}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            _check_depth(k, file, depth + 1)
            _check_depth(v, file, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            _check_depth(v, file, depth + 1)


# --- requirements ------------------------------------------------------------------------------

_COMMON = ("id", "when", "when_absent", "fix", "source", "reason")


Conditions = dict[str, tuple["Requirement", ...]]


def _requirement(node: _Node, named: Conditions) -> Requirement:
    fields = node.mapping()
    kinds = [k for k in fields if k in REQUIREMENT_KINDS]
    if len(kinds) != 1:
        found = f"found {', '.join(kinds)}" if kinds else "found none"
        raise node.error(
            f"needs exactly one requirement kind ({found}; valid: {', '.join(REQUIREMENT_KINDS)})"
        )
    kind = kinds[0]
    extra = {"package": ("version", "installed"), "env": ("equals",)}.get(kind, ())
    node.mapping((kind, *extra, *_COMMON))  # rejects unknown keys with the valid ones
    value = fields[kind]
    arg: object = None
    children: tuple[Requirement, ...] = ()
    if kind == "package":
        arg = value.text()
    elif kind == "compute_capability":
        if isinstance(value.node, yaml.SequenceNode):
            arg = tuple(n.integer() for n in value.sequence())
            if not arg:
                raise value.error("should list at least one compute capability (e.g. [100, 103])")
        else:
            arg = value.specifier()
    elif kind in ("cudnn_backend", "cuda_runtime", "cuda_driver"):
        arg = value.specifier()
    elif kind == "nvcc":
        arg = SpecifierSet("") if value.scalar() is True else value.specifier()
    elif kind == "ninja":
        if not value.boolean():
            raise value.error("only 'ninja: true' is meaningful")
    elif kind == "same_version":
        names = value.texts()
        if len(names) != 2:
            raise value.error("should list exactly two distributions")
        arg = names
    elif kind == "env":
        name = value.text()
        if not VAR_RE.match(name):
            raise value.error(f"{name!r} is not a valid environment variable name")
        arg = name
    elif kind == "use":
        name = value.text()
        if name not in named:
            valid = ", ".join(named) or "none are defined above this point"
            raise value.error(f"names no entry of 'conditions' (valid: {valid})")
        arg = name
        children = named[name]
    else:  # any_of / all_of
        children = tuple(_requirement(n, named) for n in value.sequence())
        if not children:
            raise value.error("should list at least one requirement")
    default_id = {"package": str(arg), "env": str(arg), "use": str(arg)}.get(kind, kind)
    if kind in ("any_of", "all_of") and "id" not in fields:
        raise node.error(f"an '{kind}' requirement needs an 'id'")
    when: tuple[tuple[str, SpecifierSet], ...] = ()
    if "when" in fields:
        when = tuple((k, v.specifier()) for k, v in fields["when"].mapping().items())
    return Requirement(
        kind=kind,
        id=_opt(fields, "id", _Node.text) or default_id,
        arg=arg,
        version=_opt(fields, "version", _Node.specifier),
        negate=not fields["installed"].boolean() if "installed" in fields else False,
        equals=_opt(fields, "equals", _Node.text),
        children=children,
        when=when,
        when_absent=_opt(fields, "when_absent", _Node.boolean) or False,
        fix=_opt(fields, "fix", _Node.text),
        source=_opt(fields, "source", _Node.text),
        reason=_opt(fields, "reason", _Node.text),
        line=node.line,
    )


def _advisory(node: _Node, named: Conditions) -> Advisory:
    fields = node.mapping(("id", "if", "reason", "fix", "source"))
    return Advisory(
        id=_required(fields, "id", node).text(),
        conditions=tuple(_requirement(n, named) for n in _required(fields, "if", node).sequence()),
        reason=_required(fields, "reason", node).text(),
        fix=_opt(fields, "fix", _Node.text),
        source=_opt(fields, "source", _Node.text),
    )


def _backend(name: str, node: _Node, named: Conditions) -> Backend:
    if not NAME_RE.match(name):
        raise node.error("backend names are lower-case letters, digits, '-', '_' and '.'")
    fields = node.mapping(("summary", "native", "aliases", "smoke", "requires", "advisories"))
    requires = (
        tuple(_requirement(n, named) for n in fields["requires"].sequence())
        if "requires" in fields
        else ()
    )
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
        summary=_required(fields, "summary", node).text(),
        native=_required(fields, "native", node).boolean(),
        aliases=_opt(fields, "aliases", _Node.texts) or (),
        smoke=_opt(fields, "smoke", _Node.texts) or (),
        requires=requires,
        advisories=tuple(_advisory(n, named) for n in fields["advisories"].sequence())
        if "advisories" in fields
        else (),
    )


# --- eras and knobs ----------------------------------------------------------------------------


def _knob(node: _Node, backends: dict[str, Backend]) -> Knob:
    fields = node.mapping(
        (
            *KNOB_KINDS,
            "values",
            "type",
            "bool_style",
            "case_sensitive",
            "deprecated",
            "select",
            "note",
            "on_invalid",
            "source",
        )
    )
    kinds = [k for k in KNOB_KINDS if k in fields]
    if len(kinds) != 1:
        raise node.error(f"needs exactly one of: {', '.join(KNOB_KINDS)}")
    kind = kinds[0]
    name = fields[kind].text()
    if kind == "env" and not VAR_RE.match(name):
        raise fields[kind].error(f"{name!r} is not a valid environment variable name")
    values_node = _required(fields, "values", node)
    values: dict[str, tuple[str, ...]] = {}
    for backend, spellings in values_node.mapping().items():
        if backend not in backends:
            raise spellings.error(
                f"names no backend of this profile (valid: {', '.join(backends)})"
            )
        values[backend] = spellings.texts()
        if not values[backend]:
            raise spellings.error("should give at least one spelling")
    return Knob(
        kind=kind,
        name=name,
        values=values,
        type=_opt(fields, "type", lambda n: n.choice(("choice", "bool"))) or "choice",
        bool_style=_opt(fields, "bool_style", lambda n: n.choice(("int", "word"))) or "int",
        case_sensitive=True
        if "case_sensitive" not in fields
        else fields["case_sensitive"].boolean(),
        deprecated=_opt(fields, "deprecated", _Node.text),
        select=True if "select" not in fields else fields["select"].boolean(),
        note=_opt(fields, "note", _Node.text),
        on_invalid=_opt(fields, "on_invalid", _Node.text),
        source=_opt(fields, "source", _Node.text),
    )


def _auto_step(node: _Node, backends: dict[str, Backend], named: Conditions) -> AutoStep:
    fields = node.mapping(("backend", "if"))
    backend_node = _required(fields, "backend", node)
    backend = backend_node.text()
    if backend not in backends:
        raise backend_node.error(f"names no backend of this profile (valid: {', '.join(backends)})")
    conditions = (
        tuple(_requirement(n, named) for n in fields["if"].sequence()) if "if" in fields else ()
    )
    return AutoStep(backend=backend, conditions=conditions)


def _era(node: _Node, backends: dict[str, Backend], named: Conditions) -> Era:
    fields = node.mapping(("versions", "knobs", "auto", "conflicts", "reads", "note", "source"))
    return Era(
        versions=_required(fields, "versions", node).specifier(),
        knobs=tuple(_knob(n, backends) for n in fields["knobs"].sequence())
        if "knobs" in fields
        else (),
        auto=tuple(
            _auto_step(n, backends, named) for n in _required(fields, "auto", node).sequence()
        ),
        conflicts=_opt(fields, "conflicts", _Node.texts) or (),
        reads=_opt(fields, "reads", _Node.texts) or (),
        note=_opt(fields, "note", _Node.text),
        source=_opt(fields, "source", _Node.text),
        line=node.line,
    )


# --- the whole profile -------------------------------------------------------------------------


def parse(text: str, file: str) -> Profile:
    """Validate profile YAML text; raise ProfileError naming file, line and key."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ProfileError(f"{file}: larger than {MAX_BYTES} bytes; a profile is a page of rules")
    try:
        nodes = list(yaml.compose_all(text, Loader=_LOADER))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        raise ProfileError(f"{file}{line}: not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{file}: not valid YAML: {exc}") from None
    except RecursionError:
        raise ProfileError(f"{file}: nested too deeply to read") from None
    if len(nodes) != 1 or nodes[0] is None:
        raise ProfileError(f"{file}: should hold exactly one YAML document")
    # Aliases first: a tree of aliases (a "billion laughs") is exponential to walk.
    if _has_alias(nodes[0]):
        raise ProfileError(f"{file}: YAML anchors and aliases are not allowed in profiles")
    _check_depth(nodes[0], file)
    root = _Node(nodes[0], "", file)
    fields = root.mapping(
        (
            "schema",
            "target",
            "title",
            "engine",
            "source",
            "conditions",
            "backends",
            "eras",
            "variables",
        )
    )
    schema_node = _required(fields, "schema", root)
    schema = schema_node.integer()
    if schema != SCHEMA:
        raise schema_node.error(f"is {schema}; this fp4doctor reads schema {SCHEMA}")
    target_node = _required(fields, "target", root)
    target = target_node.text()
    if not NAME_RE.match(target):
        raise target_node.error("should be a lower-case name like 'vllm'")

    engine_node = _required(fields, "engine", root)
    ef = engine_node.mapping(("package", "newest_known", "args_variable", "config_format"))
    args_variable = _opt(ef, "args_variable", _Node.text)
    if args_variable is not None and not VAR_RE.match(args_variable):
        raise ef["args_variable"].error(f"{args_variable!r} is not a valid variable name")
    engine = Engine(
        package=_required(ef, "package", engine_node).text(),
        newest_known=_required(ef, "newest_known", engine_node).version(),
        args_variable=args_variable,
        config_format=_opt(ef, "config_format", lambda n: n.choice(CONFIG_FORMATS)) or "dotenv",
    )

    named: Conditions = {}
    if "conditions" in fields:
        for name, n in fields["conditions"].mapping().items():
            if not NAME_RE.match(name):
                raise n.error("condition names are lower-case letters, digits, '-', '_' and '.'")
            named[name] = tuple(_requirement(r, named) for r in n.sequence())

    backends_node = _required(fields, "backends", root)
    backends = {name: _backend(name, n, named) for name, n in backends_node.mapping().items()}
    if not backends:
        raise backends_node.error("should declare at least one backend")
    names: dict[str, str] = {}
    for b in backends.values():
        for name in (b.name, *b.aliases):
            if name in names and names[name] != b.name:
                raise backends_node.error(f"name or alias '{name}' is used by two backends")
            names[name] = b.name

    eras_node = _required(fields, "eras", root)
    eras = tuple(_era(n, backends, named) for n in eras_node.sequence())
    if not eras:
        raise eras_node.error("should list at least one era")

    variables = {}
    if "variables" in fields:
        for name, n in fields["variables"].mapping().items():
            if not VAR_RE.match(name):
                raise n.error("is not a valid environment variable name")
            vf = n.mapping(("note", "means"))
            means = _opt(vf, "means", _Node.text)
            if means is not None and means not in backends:
                raise vf["means"].error(
                    f"names no backend of this profile (valid: {', '.join(backends)})"
                )
            variables[name] = Variable(name=name, note=_required(vf, "note", n).text(), means=means)

    return Profile(
        target=target,
        title=_required(fields, "title", root).text(),
        engine=engine,
        backends=backends,
        eras=eras,
        variables=variables,
        source=_opt(fields, "source", _Node.text),
        path=file,
    )


def _has_alias(node: yaml.Node) -> bool:
    # An alias shows up as the very same node object appearing twice in the tree.
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            return True
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack.extend((k, v))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
    return False
