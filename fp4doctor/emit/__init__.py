"""emit: turn the resolved knobs into statements for a shell, an env file, CI, or JSON.

One module per output format, each with its own quoting; every value is validated once
(`exports.check`) and then escaped by the format so that no value can run code. bash, zsh
and dash read the same POSIX statements (`sh.py`). Config files for the engines
(`config.py`) are rendered here too.
"""

from __future__ import annotations

from collections.abc import Callable

from fp4doctor.emit import dotenv, fish, gha, pwsh, sh
from fp4doctor.emit import json as json_format
from fp4doctor.emit.exports import EmitError, Exports, check

__all__ = ["FORMATS", "EmitError", "Exports", "emit"]

_RENDERERS: dict[str, Callable[[Exports], str]] = {
    "bash": sh.render,
    "zsh": sh.render,
    "fish": fish.render,
    "sh": sh.render,
    "pwsh": pwsh.render,
    "dotenv": dotenv.render,
    "gha": gha.render,
    "json": json_format.render,
}

FORMATS: tuple[str, ...] = tuple(_RENDERERS)


def emit(fmt: str, exports: Exports) -> str:
    """Render `exports` in format `fmt`: unsets first, then sets; empty or ending with newline.

    Raises EmitError for an unknown format (listing the valid ones), an invalid name, or a
    value that the format cannot carry (the message names the key).
    """
    render = _RENDERERS.get(fmt)
    if render is None:
        raise EmitError(f"unknown format {fmt!r}; valid formats: {', '.join(FORMATS)}")
    return render(check(exports))
