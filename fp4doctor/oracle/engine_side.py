"""What every adapter does inside the engine's interpreter, whatever the engine: a case's
environment set for the question, the engine's memoised answers forgotten between compute
capabilities, and its argument parser's refusal caught as an answer.

Torch-free and engine-free at import (the worker imports it before the engine)."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
from collections.abc import Callable, Iterator
from typing import TypeVar

from fp4doctor.oracle.answers import Case

T = TypeVar("T")


@contextlib.contextmanager
def environment(case: Case) -> Iterator[None]:
    """The case's variables set and unset for the duration of the question (vLLM's `envs` and
    SGLang's `environ` read os.environ when asked)."""
    saved = dict(os.environ)
    for name in case.unset_env:
        os.environ.pop(name, None)
    os.environ.update(dict(case.set_env))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def forget_memoised(prefix: str) -> None:
    """Empty the functools caches of the engine's modules (`prefix`: 'vllm', 'sglang'), module
    functions and class methods alike, so that nothing computed for the last case's compute
    capability (vLLM's `cutlass_fp4_supported`, SGLang's `is_sm100_supported`) answers this
    one."""
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith(prefix):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, functools._lru_cache_wrapper):
                value.cache_clear()
            elif isinstance(value, type) and value.__module__ == module.__name__:
                for attr in list(vars(value).values()):
                    inner = getattr(attr, "__func__", attr)
                    if isinstance(inner, functools._lru_cache_wrapper):
                        inner.cache_clear()


class NotAsked(Exception):
    """The adapter cannot ask this release the case (a layer class it has no selection for):
    no answer is sent, and the rules' answer stands for it."""


class ParserRefused(ValueError):
    """The engine's own argument parser refuses the case's arguments (argparse exits with 2)."""


def parsed(parse: Callable[[], T], args: tuple[str, ...]) -> T:
    """`parse()`, the engine's parser run over `args`; its exit (an invalid choice, an unknown
    flag) raised as ParserRefused with the parser's last line, the refusal a user would read."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return parse()
    except SystemExit:
        lines = [line for line in said.getvalue().splitlines() if line.strip()]
        raise ParserRefused(lines[-1] if lines else f"argument parser exits on {args}") from None
