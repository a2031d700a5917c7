"""What `env` exports, and the checks every output format relies on.

The checks live here, once: a name must match ``^[A-Za-z_][A-Za-z0-9_]*$``, a value must be
text that an environment can hold (no NUL, encodable as UTF-8), and each name appears once.
Each format then refuses only what its own syntax cannot carry.

A *list* (`Exports.lists`) is a variable that holds several words, an engine's flags
(``FP4DOCTOR_VLLM_ARGS='--linear-backend=flashinfer_cudnn --moe-backend=cutlass'``), for
``vllm serve MODEL $FP4DOCTOR_VLLM_ARGS``. Its value is the words joined by one space, so that
every format and every program that reads the environment gets the same string; a shell with
arrays sets it as one as well (zsh, fish, PowerShell), so that the unquoted expansion gives one
argument per word there too. Each word is made only of `PLAIN` characters: then bash and sh
split the unquoted expansion into exactly the words (the default IFS) and no word can glob.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEY_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The characters that no shell, dotenv reader or glob gives a meaning: ASCII letters, digits and
# _ . , : + = @ % / -  (dotenv.py writes only these bare; a list's words hold only these).
PLAIN = "A-Za-z0-9_.,:+=@%/-"
_PLAIN_WORD = re.compile(f"[{PLAIN}]+")


class EmitError(ValueError):
    """A name or value that cannot be emitted; the message names the key (or the format)."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key

    @classmethod
    def refused(cls, fmt: str, key: str, why: str) -> EmitError:
        """The value of `key` cannot be written in `fmt`, because `why`."""
        return cls(f"cannot emit {key} for {fmt}: {why}", key=key)


class Unwritable(EmitError):
    """The format asked for cannot hold the answer (a dotenv file of two flags, a value docker
    would read otherwise): no mistake of the user's, and no fault of the answer, so not a usage
    error (2), not "not ready" (1): the output could not be written, exit 4 (cli/console.py),
    with what to use instead."""


@dataclass(frozen=True)
class Exports:
    """Ordered names to set (with their values) and names to unset (conflicting knobs); `lists`
    names the variables of `set` whose value is several words joined by one space."""

    set: tuple[tuple[str, str], ...] = ()
    unset: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()

    def words(self, name: str) -> list[str]:
        """The words of the list `name` (its value split at the single spaces that join them)."""
        return dict(self.set)[name].split(" ")


def check_key(key: object) -> str:
    """Return `key` if it is a portable environment variable name, else raise EmitError."""
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise EmitError(
            f"invalid variable name {key!r}: a name must match ^[A-Za-z_][A-Za-z0-9_]*$",
            key=str(key),
        )
    return key


def check_value(key: str, value: object) -> str:
    """Return `value` if an environment (and every format) can hold it, else raise EmitError."""
    if not isinstance(value, str):
        raise EmitError(f"value of {key} must be a string, not {type(value).__name__}", key=key)
    if "\0" in value:
        # execve() ends every environment string at the first NUL: no format can carry one.
        raise EmitError(
            f"value of {key} contains a NUL character: no environment can hold it", key=key
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise EmitError(
            f"value of {key} holds a lone surrogate: it is not text that UTF-8 can write",
            key=key,
        ) from None
    return value


def check(exports: Exports) -> Exports:
    """Validate every name and value once, before any format renders them."""
    seen: set[str] = set()
    for key in exports.unset:
        check_key(key)
        if key in seen:
            raise EmitError(f"{key} is named twice in the names to unset", key=key)
        seen.add(key)
    unset = frozenset(exports.unset)
    set_names: set[str] = set()
    for pair in exports.set:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise EmitError(f"each export must be a (name, value) pair, not {pair!r}")
        key, value = pair
        check_key(key)
        if key in unset:
            raise EmitError(f"{key} is both set and unset", key=key)
        if key in set_names:
            raise EmitError(f"{key} is set twice", key=key)
        set_names.add(key)
        check_value(key, value)
    values = dict(exports.set)
    for key in exports.lists:
        if key not in values:
            raise EmitError(f"{key} is named a list but is not set", key=key)
        if exports.lists.count(key) > 1:
            raise EmitError(f"{key} is named a list twice", key=key)
        for word in values[key].split(" "):
            if not _PLAIN_WORD.fullmatch(word):
                raise EmitError(
                    f"cannot emit {key}: the word {word!r} (of {values[key]!r}) is not made only "
                    "of ASCII letters, digits and _ . , : + = @ % / -, so an unquoted "
                    f"${key} in bash or sh would not give it back as one argument",
                    key=key,
                )
    return exports
