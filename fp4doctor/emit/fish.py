"""fish statements (`set -gx NAME 'value';`).

Inside fish single quotes only ``\\\\`` and ``\\'`` are escapes; everything else is literal. A
newline or CR in a value is written outside the quotes as the fish escape ``\\n`` or ``\\r``, so
each statement stays on one line and ends with ``;``: the output then works both with
``fp4doctor env --shell fish | source`` and with ``eval (fp4doctor env --shell fish)``, which
splits the output into lines and joins them with spaces.

A list (an engine's flags, `Exports.lists`) is set as a fish list, one word per element,
``set -gx NAME '--a=x' '--b=y';``: its unquoted expansion gives one argument per flag
(``vllm serve MODEL $FP4DOCTOR_VLLM_ARGS``), and fish exports it joined by spaces, the same
string every other format writes.

Variables are set and erased in the global scope (``-g``). A universal variable
(``set -Ux``) of the same name is left alone: fp4doctor does not change fish's persistent
configuration; a global variable set here shadows it.
"""

from __future__ import annotations

from fp4doctor.emit.exports import Exports

_OUTSIDE_QUOTES = {"\n": "\\n", "\r": "\\r"}


def quote(value: str) -> str:
    """Quote `value` as one fish word that expands to exactly `value`."""
    if not value:
        return "''"
    words: list[str] = []
    run: list[str] = []
    for char in value:
        if char in _OUTSIDE_QUOTES:
            if run:
                words.append("'" + "".join(run) + "'")
                run = []
            words.append(_OUTSIDE_QUOTES[char])
        elif char in "\\'":
            run.append("\\" + char)
        else:
            run.append(char)
    if run:
        words.append("'" + "".join(run) + "'")
    return "".join(words)


def render(exports: Exports) -> str:
    """Erase statements, then set statements, one per line, each ending with ``;``."""
    lines = [f"set -e -g {name};" for name in exports.unset]
    for name, value in exports.set:
        words = exports.words(name) if name in exports.lists else [value]
        lines.append(f"set -gx {name} {' '.join(quote(w) for w in words)};")
    return "".join(line + "\n" for line in lines)


def usage(name: str) -> str:
    """How a command line takes the list `name`, in fish."""
    return f"${name} (a fish list: one argument per flag)"
