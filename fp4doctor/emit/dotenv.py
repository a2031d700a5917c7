"""dotenv lines (`NAME=value`) that python-dotenv and ``docker run --env-file`` read alike.

Docker's env-file reader takes everything after the first ``=`` literally: it has no quoting
and no escapes. python-dotenv strips quotes, whitespace and `` #`` comments, and expands
``${NAME}``. The only form both read as the same value is an unquoted value that none of
python-dotenv's rules touch, so a value is written bare and refused when it:

- holds a newline or CR (a line ends there; docker drops a trailing CR);
- starts or ends with whitespace (python-dotenv strips it, docker keeps it);
- starts with a quote (python-dotenv reads a quoted value, docker keeps the quotes);
- holds whitespace followed by ``#`` (python-dotenv reads a comment);
- holds ``$`` (python-dotenv expands ``${NAME}``; Docker Compose's ``env_file`` also
  expands ``$NAME``);
- makes the line longer than docker's 64 KiB line limit.

A dotenv file cannot remove a variable: a name to unset is written as a comment, so the
reader sees which knob conflicts. A dotenv file is not a shell script: for a shell, use the
shell formats, which quote every value.
"""

from __future__ import annotations

import re

from fp4doctor.emit.exports import EmitError, Exports

# bufio.Scanner's default limit (MaxScanTokenSize), which docker's env-file reader keeps;
# the limit covers the line and its newline.
DOCKER_MAX_LINE_BYTES = 64 * 1024 - 1

_WHITESPACE_THEN_HASH = re.compile(r"\s#")


def check_value(name: str, value: str) -> None:
    """Raise EmitError when python-dotenv or docker would not read `value` back unchanged."""

    def refuse(why: str) -> EmitError:
        return EmitError.refused("dotenv", name, why)

    if "\n" in value or "\r" in value:
        raise refuse("a dotenv value cannot hold a newline or carriage return")
    if value[:1].isspace() or value[-1:].isspace():
        raise refuse("python-dotenv strips leading and trailing whitespace, docker keeps it")
    if value[:1] in ("'", '"'):
        raise refuse("python-dotenv reads a leading quote as quoting, docker keeps it")
    if _WHITESPACE_THEN_HASH.search(value):
        raise refuse("python-dotenv reads whitespace followed by '#' as a comment")
    if "$" in value:
        raise refuse("python-dotenv and Docker Compose expand '$' in values")
    if len(f"{name}={value}".encode()) > DOCKER_MAX_LINE_BYTES:
        raise refuse("docker reads env-file lines of at most 64 KiB")


def render(exports: Exports) -> str:
    """Comments for the names to unset, then one ``NAME=value`` line per variable."""
    for name, value in exports.set:
        check_value(name, value)
    lines = [f"# unset {name} (a dotenv file cannot remove a variable)" for name in exports.unset]
    lines += [f"{name}={value}" for name, value in exports.set]
    return "".join(line + "\n" for line in lines)
