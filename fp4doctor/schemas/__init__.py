"""The JSON Schemas (draft 2020-12) of every JSON document fp4doctor writes, shipped in the
package so that a pipeline can validate what it reads with the schema of the version it got.

    facts-v1        `fp4doctor probe --json`, read back by `--facts FILE` (facts.SCHEMA_VERSION)
    report-v3       `fp4doctor check --json` (render.REPORT_SCHEMA_VERSION); report-v1 and
                    report-v2 its earlier forms (a document names its version)
    advisories-v1   `fp4doctor advisories --json` (a bare array: no schema_version in it)
    env-v1          `fp4doctor env --shell json` (no schema_version in it)
    fleet-v1        `fp4doctor fleet --json` (fleet.render.FLEET_SCHEMA_VERSION)
    explain-v1      `fp4doctor explain --json` (no schema_version in it)
    diff-v1         `fp4doctor diff --json` (diff.DIFF_SCHEMA_VERSION)

A facts or report document names its own schema with `schema_version` (`schema_for`). The
schemas are closed (`additionalProperties: false`) where the document's shape is: a key added to
a document without its schema fails the tests, which validate every document they produce
(docs/pipelines.md says how to extend one). Validating needs the `jsonschema` package (the
`test` extra); reading a schema needs nothing but the standard library.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

FACTS, REPORT, ADVISORIES, ENV = "facts", "report", "advisories", "env"
FLEET, EXPLAIN, DIFF = "fleet", "explain", "diff"
KINDS = (FACTS, REPORT, ADVISORIES, ENV, FLEET, EXPLAIN, DIFF)
#: The versions of each kind shipped: the one the code writes last, the earlier ones kept so
#: that a document written by an older fp4doctor still validates with its own.
VERSIONS = {
    FACTS: (1,),
    REPORT: (1, 2, 3),
    ADVISORIES: (1,),
    ENV: (1,),
    FLEET: (1,),
    EXPLAIN: (1,),
    DIFF: (1,),
}
_ENV_KEYS = frozenset({"outcome", "set", "unset", "lists"})
_EXPLAIN_KEYS = frozenset({"engine", "target", "model", "tp", "ep", "layers"})
URN_PREFIX = "urn:fp4doctor:schema:"  # `$id` of each file: urn:fp4doctor:schema:report-v1


class UnknownDocument(ValueError):
    """A JSON document that no shipped schema describes (or a version this package lacks)."""


def file_name(kind: str, version: int = 1) -> str:
    """`report-v1.schema.json`: the file of one schema, in this package's directory."""
    if kind not in KINDS:
        raise UnknownDocument(f"unknown kind of document {kind!r} (known: {', '.join(KINDS)})")
    return f"{kind}-v{version}.schema.json"


def available() -> list[str]:
    """Every schema file shipped, sorted: `["advisories-v1.schema.json", ...]`."""
    return sorted(
        entry.name
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(".schema.json")
    )


def load(kind: str, version: int = 1) -> dict[str, Any]:
    """The schema of `kind` at `version`, parsed."""
    name = file_name(kind, version)
    try:
        text = resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnknownDocument(
            f"no schema {name} in this fp4doctor (shipped: {', '.join(available())})"
        ) from None
    schema: dict[str, Any] = json.loads(text)
    return schema


def kind_of(document: Any) -> tuple[str, int]:
    """Which schema a document fp4doctor wrote is an instance of, and its version: a facts or a
    report or fleet document by its `schema_version` and its keys; the documents without a
    version (advisories, env, explain) by their shape."""
    if isinstance(document, list):
        return ADVISORIES, 1
    if not isinstance(document, dict):
        raise UnknownDocument("not a document fp4doctor writes: neither an object nor an array")
    version = document.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool):
        if "from" in document and "to" in document:
            return DIFF, version
        if "findings" in document or "resolution" in document:
            return REPORT, version
        if "groups" in document or "outliers" in document:
            return FLEET, version
        if "nvml" in document or "gpus" in document:
            return FACTS, version
    if {"set", "unset"} <= set(document) <= _ENV_KEYS:
        return ENV, 1
    if set(document) == _EXPLAIN_KEYS:
        return EXPLAIN, 1
    raise UnknownDocument(
        "not a document fp4doctor writes: no schema_version with a report's or facts' keys, "
        "and neither an env document ({'set': ..., 'unset': ...}) nor an explanation"
    )


def schema_for(document: Any) -> dict[str, Any]:
    """The schema that `document` names (see `kind_of`)."""
    return load(*kind_of(document))
