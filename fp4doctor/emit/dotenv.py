"""dotenv files (``NAME=value`` lines) that every reader of ours reads to the same value.

A dotenv file of ours is read in three ways, and docs/pipelines.md promises all three:

- a POSIX shell, ``set -a; . ./fp4.env; set +a`` (dash, bash): quotes and backslashes are
  removed, ``$`` and backquotes expand, whitespace ends the assignment and the rest of the
  line runs as a command, ``; & | < > ( )`` are operators, ``~`` expands after ``=`` or ``:``;
- ``docker run --env-file``: everything after the first ``=`` is the value, literally: no
  quoting, no escapes, no comments; a line is at most 64 KiB;
- python-dotenv (``dotenv_values``, ``load_dotenv``): quotes are removed, leading and
  trailing whitespace (Unicode whitespace included) is stripped, whitespace then ``#`` starts
  a comment, ``${NAME}`` expands.

docker keeps quotes literally and the shell needs them for anything special, so no quoting
works for all three: the only common form is a bare value that none of them gives a
meaning. A value is therefore written bare when it is made only of ASCII letters, digits and
``_ - . / : , + = @ %`` (``--linear-backend=flashinfer_cudnn``, ``a:b,c``, the empty value),
and refused otherwise with an EmitError that says which reader would change it and what to
use instead. Engine flags are emitted as one word (``--flag=value``) so that one fits; two
flags (a space) cannot be a dotenv value: `emit.config.dotenv_words` refuses them first, naming
what works for that engine release (its own config file, or `fp4doctor env` in a shell).

A dotenv file cannot remove a variable: a name to unset is written as a comment, which all
three readers skip, so the reader sees which knob conflicts.
"""

from __future__ import annotations

import re

from fp4doctor.emit.exports import PLAIN, Exports, Unwritable

# bufio.Scanner's default limit (MaxScanTokenSize), which docker's env-file reader keeps;
# the limit covers the line and its newline.
DOCKER_MAX_LINE_BYTES = 64 * 1024 - 1

# Any character other than those that no reader gives a meaning, anywhere in a value.
_UNSAFE = re.compile(f"[^{PLAIN}]")

_INSTEAD = (
    "; a shell reads it from `fp4doctor env --shell bash` (or zsh, fish, sh, pwsh), a program "
    "from `fp4doctor env --shell json`"
)

# Why a character that _UNSAFE finds would be read differently; the first match wins.
_REASONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[\n\r]"), "a newline or carriage return ends a dotenv line"),
    (
        re.compile(r"\s"),
        "`. FILE` in sh ends the assignment at whitespace and runs the rest as a command, "
        "python-dotenv strips it at the ends, and docker --env-file keeps quotes literally, "
        "so no quoting reads the same in all three",
    ),
    (
        re.compile(r"[$`]"),
        "sh expands it (python-dotenv too, in '${'), docker --env-file keeps it literally",
    ),
    (
        re.compile(r"[\"'\\]"),
        "sh and python-dotenv remove quotes and backslashes, docker --env-file keeps them",
    ),
    (
        re.compile(r"[;&|<>()]"),
        "sh reads it as an operator and would run the rest of the line as a command",
    ),
    (
        re.compile(r"[#~*?\[\]{}!^]"),
        "sh or python-dotenv give it a meaning in some positions (comment, tilde, glob)",
    ),
)


def check_value(name: str, value: str) -> None:
    """Raise EmitError unless sh, docker and python-dotenv all read `value` back unchanged."""
    unsafe = _UNSAFE.search(value)
    if unsafe is not None:
        bad = unsafe.group()
        raise Unwritable.refused(
            "dotenv", name, f"the value holds {bad!r}: {_reason(bad)}{_INSTEAD}"
        )
    if len(f"{name}={value}".encode()) > DOCKER_MAX_LINE_BYTES:
        raise Unwritable.refused(
            "dotenv", name, f"docker reads env-file lines of at most 64 KiB{_INSTEAD}"
        )


def _reason(char: str) -> str:
    if char == " ":  # the likely cause: engine flags not joined as --flag=value
        return "two flags in one value? " + _reason("\t")
    for pattern, why in _REASONS:
        if pattern.fullmatch(char):
            return why
    return (
        "only ASCII letters, digits and _ - . / : , + = @ % are written bare, so that sh in "
        "any locale, docker and python-dotenv read the same bytes"
    )


def render(exports: Exports) -> str:
    """Comments for the names to unset, then one ``NAME=value`` line per variable."""
    for name, value in exports.set:
        check_value(name, value)
    lines = [f"# unset {name} (a dotenv file cannot remove a variable)" for name in exports.unset]
    lines += [f"{name}={value}" for name, value in exports.set]
    return "".join(line + "\n" for line in lines)
