"""emit: turn the resolved knobs into statements for a shell, an env file, CI, or JSON.

One module per output format, each with its own quoting; every value is validated once
(`exports.check`) and then escaped by the format so that no value can run code. bash and dash
read the same POSIX statements (`sh.py`); zsh reads them too, with a list (an engine's flags)
set as an array (`zsh.py`). Config files for the engines (`config.py`) are rendered here too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from fp4doctor.emit.exports import EmitError, Exports, check

__all__ = ["FORMATS", "EmitError", "Exports", "emit", "usage"]

# Each format's module (under fp4doctor.emit), imported when it is asked for: `env` prints one
# format, and `gha`'s random delimiter alone would import `secrets` (and OpenSSL's hashes).
_MODULES: dict[str, str] = {
    "bash": "sh",
    "zsh": "zsh",
    "fish": "fish",
    "sh": "sh",
    "pwsh": "pwsh",
    "dotenv": "dotenv",
    "gha": "gha",
    "json": "json",
}

FORMATS: tuple[str, ...] = tuple(_MODULES)


def emit(fmt: str, exports: Exports) -> str:
    """Render `exports` in format `fmt`: unsets first, then sets; empty or ending with newline.

    Raises EmitError for an unknown format (listing the valid ones), an invalid name, or a
    value that the format cannot carry (the message names the key).
    """
    module = _MODULES.get(fmt)
    if module is None:
        raise EmitError(f"unknown format {fmt!r}; valid formats: {', '.join(FORMATS)}")
    render: Callable[[Exports], str] = importlib.import_module(f"fp4doctor.emit.{module}").render
    return render(check(exports))


def usage(fmt: str, name: str) -> str | None:
    """How a command line takes the list variable `name` in the shell of `fmt` (for the note on
    stderr), or None for a format that is not a shell."""
    module = _MODULES.get(fmt)
    if module not in ("sh", "zsh", "fish", "pwsh"):
        return None
    shell = importlib.import_module(f"fp4doctor.emit.{module}")
    text: str = shell.usage(name)
    return text
