"""Reading the files users hand us (profiles, facts snapshots) as UTF-8 text, with one message
per way it can fail; each caller raises it as its own error type."""

from __future__ import annotations

from pathlib import Path


class UnreadableText(ValueError):
    """The file cannot be read, or is not UTF-8; the message starts with its path."""


def read_text(path: str | Path) -> str:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise UnreadableText(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableText(f"{p}: not UTF-8 text (byte {exc.start})") from None
