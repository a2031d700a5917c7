"""POSIX shell statements (`export NAME='value'`), read the same way by bash, zsh and dash.

Inside single quotes a POSIX shell gives no character a special meaning (no `$`, backquote,
backslash, `!` or glob), so the only character to handle is the single quote itself, which
is written outside the quotes as ``\\'``. Newlines, CR and every other byte stay literal. Empty
quoted runs are never written, so zsh's RC_QUOTES option (``''`` inside quotes) cannot change
the reading. bash, zsh and dash need no emitter of their own: the statements below are the same
for the three, and tests/test_emit_shells.py runs each real shell on them.

Use: ``eval "$(fp4doctor env --shell bash)"``.
"""

from __future__ import annotations

from fp4doctor.emit.exports import Exports


def quote(value: str) -> str:
    """Quote `value` as one POSIX shell word that expands to exactly `value`."""
    if not value:
        return "''"
    return "\\'".join(f"'{part}'" if part else "" for part in value.split("'"))


def render(exports: Exports) -> str:
    """Unset statements, then export statements, one per line."""
    lines = [f"unset -v {name}" for name in exports.unset]
    lines += [f"export {name}={quote(value)}" for name, value in exports.set]
    return "".join(line + "\n" for line in lines)
