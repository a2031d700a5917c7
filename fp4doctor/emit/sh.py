"""POSIX shell statements (`export NAME='value'`), read the same way by bash, zsh and dash.

Inside single quotes a POSIX shell gives no character a special meaning (no `$`, backquote,
backslash, `!` or glob), so the only character to handle is the single quote itself, which
is written outside the quotes as ``\\'``. Newlines, CR and every other byte stay literal. Empty
quoted runs are never written, so zsh's RC_QUOTES option (``''`` inside quotes) cannot change
the reading. bash, zsh and dash need no emitter of their own: the statements below are the same
for the three, and tests/test_emit_shells.py runs each real shell on them. zsh's own format
(`zsh.py`) is these statements with a list set as an array.

A list (an engine's flags, `Exports.lists`) is exported as one string, its words joined by a
space, and used unquoted: ``vllm serve MODEL $FP4DOCTOR_VLLM_ARGS``. bash and sh split it into
the words at the default IFS, and no word holds a glob or IFS character (`exports.check`). It is
not a bash array: a bash array cannot be exported (a script the shell starts would not see
it), sh has none, and "bash" and "sh" are one format. A shell whose IFS was changed must
reset it (``IFS=$' \t\n'``) before that line.

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


def usage(name: str) -> str:
    """How a command line takes the list `name`, in bash and sh."""
    return f"${name} (unquoted: bash and sh split it into its flags)"
