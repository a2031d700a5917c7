"""Library error text, shortened to a one-line reason without losing the line that matters.

cuDNN's refusal of an NVFP4 graph on Hopper is forty lines long; the line a user needs
(`FORT_NATIVE_10X engine is only supported since Blackwell architecture`) is in the middle.
A reason keeps the first line and the most telling later line; `library_error` keeps the
text itself, trimmed.
"""

from __future__ import annotations

import traceback

LIBRARY_ERROR_CHARS = 2000
_PART_CHARS = 240

# Later lines worth quoting, best first (case-insensitive substrings).
_TELLING = (
    "only supported since",
    "not supported",
    "does not support",
    "no valid",
    "not_supported",
    "unsupported",
    "requires",
    "error",
)


def exception_text(exc: BaseException) -> str:
    """`Type: message` as Python prints it, whole."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def trim(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked with an ellipsis when cut."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def telling_line(text: str) -> str:
    """One line: the first line of `text`, plus its most telling later line when there is one."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "(no message)"
    first = trim(lines[0], _PART_CHARS)
    rest = lines[1:]
    for key in _TELLING:
        for line in rest:
            if key in line.lower() and line.lower() not in first.lower():
                return f"{first} … {trim(line, _PART_CHARS)}"
    return first


def summarize(exc: BaseException) -> tuple[str, str]:
    """`(reason, library_error)` for an exception a library raised."""
    text = exception_text(exc)
    return telling_line(text), trim(text, LIBRARY_ERROR_CHARS)
