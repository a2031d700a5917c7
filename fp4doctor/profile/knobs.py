"""The kinds of knob that select a backend, one entry each in `STYLES` (the registry): how a
user writes one in a message and in the Markdown docs, and what it is called. Adding a kind is
adding an entry here (and its emitter, fp4doctor/emit/)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass


class KnobKind(str, enum.Enum):
    """How an engine release takes a backend choice."""

    ENV = "env"  # an environment variable
    CLI = "cli"  # a command-line flag
    CONFIG = "config"  # a key of the engine's options YAML
    ARGUMENT = "argument"  # a function argument (a library used directly)

    def __str__(self) -> str:
        return self.value


Spell = Callable[[str, str, bool], str]  # (name, value, scalar) -> text


@dataclass(frozen=True)
class KnobStyle:
    """What a kind of knob is called, and how a user writes one."""

    label: str
    message: Spell  # for messages: `VLLM_X=y`, `--linear-backend y`
    markdown: Spell  # for the docs (without the code quotes)


STYLES: dict[KnobKind, KnobStyle] = {
    KnobKind.ENV: KnobStyle(
        "environment variable",
        lambda name, value, scalar: f"{name}={value}",
        lambda name, value, scalar: f"{name}={value}",
    ),
    KnobKind.CLI: KnobStyle(
        "command-line flag",
        lambda name, value, scalar: f"{name} {value}",
        lambda name, value, scalar: f"{name} {value}",
    ),
    KnobKind.CONFIG: KnobStyle(
        "config key",
        lambda name, value, scalar: (
            f"{name}: {value if scalar else f'[{value}]'} in the options YAML"
        ),
        lambda name, value, scalar: f"{name}: [{value}]",
    ),
    KnobKind.ARGUMENT: KnobStyle(
        "function argument",
        lambda name, value, scalar: f"{name}={value!r}",
        lambda name, value, scalar: f'{name}="{value}"',
    ),
}
