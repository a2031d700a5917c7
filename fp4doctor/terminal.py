"""Text as a stream can carry it, and text from outside as it may reach a terminal: the ASCII
fallback for a stream that is not UTF-8, and the escaping of control characters. Standard
library only: every command writes through it, `probe` before any rule is loaded."""

from __future__ import annotations

import codecs
import json
import re
import unicodedata

__all__ = ["ascii_json", "ascii_text", "clean", "encoding_of", "fit"]

# What fp4doctor's own text becomes where the stream cannot carry it (a C or Latin-1 locale,
# PYTHONIOENCODING=ascii): ASCII that reads the same, never "?". The marks match ASCII_MARKS.
ASCII_FALLBACK = {
    "→": "->", "←": "<-", "·": "-", "×": "x", "—": "--", "–": "-", "−": "-", "≤": "<=",
    "≥": ">=", "✓": "ok", "✗": "XX", "…": "...", "±": "+/-", "§": "S", "‖": "||", "“": '"',
    "”": '"', "‘": "'", "’": "'", "\u00a0": " ", "µ": "u",
}  # fmt: skip
FALLBACK_ERRORS = "fp4doctor-ascii"  # a codec error handler: `text.encode(enc, FALLBACK_ERRORS)`


def ascii_text(char: str) -> str:
    """One character in ASCII: the table, else the letter without its accents (é: e), else a
    `\\u` escape (nothing is ever lost as "?")."""
    if char in ASCII_FALLBACK:
        return ASCII_FALLBACK[char]
    bare = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode("ascii")
    if bare.isprintable() and bare.strip():
        return bare
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


def _fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(ascii_text(c) for c in exc.object[exc.start : exc.end]), exc.end


codecs.register_error(FALLBACK_ERRORS, _fallback)


def encoding_of(stream: object) -> str:
    """The stream's encoding, normalised ("utf-8", "ascii", "latin-1", ...); ASCII when it has
    none or an unknown one."""
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name
    except LookupError:
        return "ascii"


def fit(text: str, encoding: str) -> str:
    """`text` as a stream in `encoding` can carry it: unchanged where it can, and every character
    it cannot carry in ASCII (`ascii_text`)."""
    return text.encode(encoding, FALLBACK_ERRORS).decode(encoding)


def ascii_json(text: str) -> str:
    """A JSON document with every non-ASCII character as a `\\u` escape: the same document as
    `json.dumps(..., ensure_ascii=True)` would write (outside strings JSON is ASCII)."""
    return re.sub(r"[^\x00-\x7f]", lambda m: json.dumps(m.group())[1:-1], text)


# The C0 controls but newline, DEL, the C1 controls, and the invisible marks that reorder or break
# a line on a terminal: a facts file, a package version or an environment value can hold any.
_CONTROLS = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_NAMED = {"\t": "\\t", "\r": "\\r", "\x1b": "\\e"}


def clean(text: object) -> str:
    """Text from outside fp4doctor as it may reach a terminal: every control character (but a
    newline) written as an escape (ESC as `\\e`, others as `\\xNN` or `\\uNNNN`), so that a
    GPU name cannot clear the screen, colour the report or retitle the window. fp4doctor's own
    colours are added (by `Style`) after this."""
    return _CONTROLS.sub(
        lambda m: (
            _NAMED.get(c := m.group())
            or (f"\\x{ord(c):02x}" if ord(c) <= 0xFF else f"\\u{ord(c):04x}")
        ),
        str(text),
    )
