"""A YAML node that knows its file, line and dotted key, with typed accessors.

Profiles are composed into nodes (never constructed into arbitrary objects: only the safe
loader's plain scalars), so every error can point at the line it comes from. Requirement kinds
parse themselves from these nodes. Nodes are told apart by their `id` ("scalar", "sequence",
"mapping"), so that importing this module (as every kind does) does not import the YAML
library: a profile read from the cache (fp4doctor/cache.py) is never composed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    import yaml


class ProfileError(Exception):
    """A profile that cannot be used; the message names the file, line and key."""


T = TypeVar("T")


class Node:
    """A YAML node with its file, line and dotted key path, and typed accessors."""

    def __init__(self, node: yaml.Node, path: str, file: str) -> None:
        self.node = node
        self.path = path
        self.file = file
        self.id: str = getattr(node, "id", "")  # "scalar", "sequence" or "mapping"

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def error(self, message: str) -> ProfileError:
        where = f" '{self.path}'" if self.path else ""
        return ProfileError(f"{self.file}:{self.line}:{where} {message}")

    def is_scalar(self) -> bool:
        return self.id == "scalar"

    def is_list(self) -> bool:
        return self.id == "sequence"

    def kind(self) -> str:
        if self.id == "mapping":
            return "a mapping"
        if self.id == "sequence":
            return "a list"
        value = self.scalar()
        if value is None:
            return "nothing (null)"
        return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
            type(value), "a value"
        )

    def scalar(self) -> Any:
        node = self.node
        if self.id != "scalar":
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

    def mapping(self, known: tuple[str, ...] | None = None) -> dict[str, Node]:
        if self.id != "mapping":
            raise self.error(f"should be a mapping, got {self.kind()}")
        out: dict[str, Node] = {}
        for key_node, value_node in self.node.value:
            key = Node(key_node, self.path, self.file).scalar()
            if not isinstance(key, str):
                key = str(key)
            child = Node(value_node, f"{self.path}.{key}" if self.path else key, self.file)
            if key in out:
                raise child.error("is given twice")
            if known is not None and key not in known:
                raise child.error(f"is not a known key here (valid: {', '.join(known)})")
            out[key] = child
        return out

    def sequence(self) -> list[Node]:
        if self.id != "sequence":
            raise self.error(f"should be a list, got {self.kind()}")
        return [Node(n, f"{self.path}[{i}]", self.file) for i, n in enumerate(self.node.value)]

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

    def is_integer(self) -> bool:
        value = self.scalar() if self.is_scalar() else None
        return isinstance(value, int) and not isinstance(value, bool)

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
        if self.is_scalar():
            return (self.text(),)
        return tuple(n.text() for n in self.sequence())


def required(fields: Mapping[str, Node], key: str, parent: Node) -> Node:
    if key not in fields:
        raise parent.error(f"is missing the required key '{key}'")
    return fields[key]


def optional(fields: Mapping[str, Node], key: str, read: Callable[[Node], T]) -> T | None:
    return read(fields[key]) if key in fields else None
