"""zsh statements: the POSIX ones (`sh.py`), with a list exported as a string tied to an array.

zsh does not split an unquoted ``$NAME`` into words (unless SH_WORD_SPLIT is set), so an
exported string of two flags would reach the engine as one argument; and zsh cannot export an
array (an array once set here was silently missing from every script or job started after the
``eval``). So a list (`Exports.lists`) is set as zsh sets PATH and path: the exported string
``NAME``, the words joined by a space as every other format exports them, tied
(``typeset -gxT``) to the array ``name`` (the name in lower case), whose unquoted expansion
gives one argument per element: ``vllm serve MODEL $fp4doctor_vllm_args``. A program the shell
starts sees ``FP4DOCTOR_VLLM_ARGS`` as bash would export it. Both names are unset first, so
that an array or a tie left by an earlier ``eval`` does not refuse the tie.

Use: ``eval "$(fp4doctor env --shell zsh)"``.
"""

from __future__ import annotations

from fp4doctor.emit.exports import Exports
from fp4doctor.emit.sh import quote


def array_name(name: str) -> str:
    """The zsh array tied to the exported list `name` (`FP4DOCTOR_VLLM_ARGS` ->
    `fp4doctor_vllm_args`, as `path` is to `PATH`)."""
    return name.lower()


def render(exports: Exports) -> str:
    """Unset statements, then export statements (a list: its exported string and tied array)."""
    lines = [f"unset -v {name}" for name in exports.unset]
    for name, value in exports.set:
        if name in exports.lists:
            array = array_name(name)
            words = " ".join(quote(w) for w in exports.words(name))
            lines.append(f"unset -v {name} {array}")
            lines.append(f"typeset -gxT {name} {array} ' '")
            lines.append(f"{array}=({words})")
        else:
            lines.append(f"export {name}={quote(value)}")
    return "".join(line + "\n" for line in lines)


def usage(name: str) -> str:
    """How a command line takes the list `name`, in zsh."""
    return f"${array_name(name)} (a zsh array tied to the exported {name}, as $path is to $PATH)"
