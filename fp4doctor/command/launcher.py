"""Which engine a command line starts, and the words its server parser reads.

The forms (each engine's own entry points):
- `vllm serve [MODEL] ...` (vllm/entrypoints/cli/main.py, `serve` subcommand);
  `python -m vllm.entrypoints.openai.api_server --model MODEL ...`;
- `python -m sglang.launch_server --model-path MODEL ...`; `sglang serve --model-path MODEL ...`
  (the `sglang` console script, sglang/cli/main.py, from SGLang 0.5.5);
- `trtllm-serve [serve] MODEL ...`.
`python` may be `python3`, `python3.12` or a path to one; `NAME=value` words and `env` before the
command are the environment it runs with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fp4doctor.command.model import CommandError

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_MODULES = {
    "vllm.entrypoints.openai.api_server": "vllm",
    "sglang.launch_server": "sglang",
}
FORMS = (
    "vllm serve MODEL ...",
    "python -m vllm.entrypoints.openai.api_server --model MODEL ...",
    "python -m sglang.launch_server --model-path MODEL ...",
    "sglang serve --model-path MODEL ...",
    "trtllm-serve MODEL ...",
)


@dataclass(frozen=True)
class Launch:
    """The engine, the entry point as written, the words after it, and the environment words."""

    target: str
    entry: str  # "vllm serve", "python -m sglang.launch_server", ...
    words: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]


def _base(word: str) -> str:
    return word.replace("\\", "/").rsplit("/", 1)[-1]


def recognise(argv: tuple[str, ...]) -> Launch:
    """The engine `argv` starts; a CommandError names the forms read when it is none of them."""
    env: list[tuple[str, str]] = []
    i = 0
    while i < len(argv) and (argv[i] == "env" or _ASSIGNMENT.match(argv[i])):
        if argv[i] != "env":
            name, _, value = argv[i].partition("=")
            env.append((name, value))
        i += 1
    rest = argv[i:]
    if not rest:
        raise CommandError("no engine command given: expected one of " + "; ".join(FORMS))
    head = _base(rest[0])
    if head == "vllm":
        if len(rest) > 1 and rest[1] == "serve":
            return Launch("vllm", "vllm serve", rest[2:], tuple(env))
        sub = rest[1] if len(rest) > 1 else "(none)"
        raise CommandError(f"vllm {sub}: fp4doctor reads the server's command line, `vllm serve`")
    if head == "sglang":
        if len(rest) > 1 and rest[1] == "serve":
            return Launch("sglang", "sglang serve", rest[2:], tuple(env))
        sub = rest[1] if len(rest) > 1 else "(none)"
        raise CommandError(
            f"sglang {sub}: fp4doctor reads the server's command line, `sglang serve`"
        )
    if head == "trtllm-serve":
        words = rest[1:]
        if words and words[0] == "serve":
            words = words[1:]
        return Launch("trtllm", "trtllm-serve", words, tuple(env))
    if _PYTHON.match(head):
        j = 1
        while j < len(rest) and rest[j].startswith("-") and rest[j] != "-m":
            j += 1  # interpreter options (-u, -O, -X dev is not read)
        if j + 1 < len(rest) and rest[j] == "-m" and rest[j + 1] in _MODULES:
            module = rest[j + 1]
            return Launch(_MODULES[module], f"python -m {module}", rest[j + 2 :], tuple(env))
        module = rest[j + 1] if j + 1 < len(rest) and rest[j] == "-m" else " ".join(rest[1:2])
        raise CommandError(
            f"{head} {module}: not an engine server fp4doctor reads; expected one of "
            + "; ".join(FORMS)
        )
    raise CommandError(f"{rest[0]}: not an engine command; expected one of " + "; ".join(FORMS))
