"""zsh statements: the POSIX ones (`sh.py`), with a list set as a zsh array.

zsh does not split an unquoted ``$NAME`` into words (unless SH_WORD_SPLIT is set), so an
exported string of two flags would reach the engine as one argument. A list (`Exports.lists`)
is therefore set as a global array, ``typeset -ga NAME=('--a=x' '--b=y')``, whose unquoted
expansion gives one argument per element: ``vllm serve MODEL $FP4DOCTOR_VLLM_ARGS``, the same
line as in bash. zsh cannot export an array: the list is a variable of this shell only, not of
the programs it starts (a script that needs it exported takes ``--shell bash``). ``typeset -ga``
turns a variable of that name that was exported before into the array, and stops exporting it.

Use: ``eval "$(fp4doctor env --shell zsh)"``.
"""

from __future__ import annotations

from fp4doctor.emit.exports import Exports
from fp4doctor.emit.sh import quote


def render(exports: Exports) -> str:
    """Unset statements, then export statements (a list: its array), one per line."""
    lines = [f"unset -v {name}" for name in exports.unset]
    for name, value in exports.set:
        if name in exports.lists:
            words = " ".join(quote(w) for w in exports.words(name))
            lines.append(f"typeset -ga {name}=({words})")
        else:
            lines.append(f"export {name}={quote(value)}")
    return "".join(line + "\n" for line in lines)


def usage(name: str) -> str:
    """How a command line takes the list `name`, in zsh."""
    return f"${name} (a zsh array: one argument per flag)"
