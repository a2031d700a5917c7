"""A JSON document: ``{"set": {NAME: value, ...}, "unset": [NAME, ...]}``.

For programs that apply the exports themselves. The output is pure ASCII (non-ASCII
characters are ``\\u`` escapes), so it survives any terminal or pipe encoding.
"""

from __future__ import annotations

import json

from fp4doctor.emit.exports import Exports


def render(exports: Exports) -> str:
    """The document, indented, ending with a newline."""
    document = {"set": dict(exports.set), "unset": list(exports.unset)}
    return json.dumps(document, indent=2, ensure_ascii=True) + "\n"
