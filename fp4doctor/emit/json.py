"""A JSON document: ``{"outcome": "ready", "set": {NAME: value, ...}, "unset": [NAME, ...]}``.

For programs that apply the exports themselves (schema: fp4doctor/schemas/env-v1.schema.json).
A variable that holds several words (an engine's flags, ``FP4DOCTOR_VLLM_ARGS``) is also given
as a list under ``"lists"``, so that a program passes each flag as its own argument without
splitting a string. When `env` has nothing to export (not ready, no verdict) the document still
comes, with that outcome and nothing to set or unset (`nothing`): a JSON reader always gets
JSON. The output is pure ASCII (non-ASCII characters are ``\\u`` escapes), so it survives any
terminal or pipe encoding.
"""

from __future__ import annotations

import json

from fp4doctor.emit.exports import Exports

READY = "ready"  # the outcome of a document that carries knobs: `env` emits only then


def render(exports: Exports) -> str:
    """The document, indented, ending with a newline."""
    document: dict[str, object] = {
        "outcome": READY,
        "set": dict(exports.set),
        "unset": list(exports.unset),
    }
    if exports.lists:
        values = dict(exports.set)
        document["lists"] = {name: values[name].split(" ") for name in exports.lists}
    return _dumps(document)


def nothing(outcome: str) -> str:
    """The document when there is nothing to export: `outcome` ("not ready", "no verdict")."""
    return _dumps({"outcome": outcome, "set": {}, "unset": []})


def _dumps(document: dict[str, object]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=True) + "\n"
