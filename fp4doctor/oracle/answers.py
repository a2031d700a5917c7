"""What the engine is asked and what it answers: plain data, JSON both ways (the worker's
protocol), torch-free."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AS_SET = "as set"
"""The label of the case that asks with the environment as it is (no knob of fp4doctor's)."""


@dataclass(frozen=True)
class Case:
    """One question: a compute capability, the environment (variables set and unset on top of
    the engine's own) and the engine's command-line arguments. `label` says what it stands for:
    `AS_SET`, or the backend whose knobs these are (`fp4doctor env --prefer BACKEND`)."""

    label: str
    family: str
    cc: tuple[int, int]
    set_env: tuple[tuple[str, str], ...] = ()
    unset_env: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    a16: bool = False  # a weight-only (W4A16) layer class: the engine's W4A16 selection

    @property
    def key(self) -> str:
        """A stable id: the answer to a case carries it."""
        major, minor = self.cc
        parts = [self.family, f"{major}.{minor}", self.label, "a16" if self.a16 else "a4"]
        parts += [f"{k}={v}" for k, v in self.set_env] + [f"-{k}" for k in self.unset_env]
        return "|".join([*parts, *self.args])

    def knobs_text(self) -> str:
        """The knobs as a user would type them (`VAR=value --flag=value`), or 'nothing set'."""
        words = [f"{k}={v}" for k, v in self.set_env] + list(self.args)
        return " ".join(words) or "no knob set"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "family": self.family,
            "cc": list(self.cc),
            "set_env": [list(p) for p in self.set_env],
            "unset_env": list(self.unset_env),
            "args": list(self.args),
            "a16": self.a16,
        }


@dataclass(frozen=True)
class Answer:
    """What the engine's own code did for one case: the kernel it picked (its own name, and
    fp4doctor's backend name when it knows it), or the exception it raised."""

    key: str
    engine_name: str | None = None  # vLLM's: 'FlashInferCutlassNvFp4LinearKernel', 'MARLIN'
    backend: str | None = None  # fp4doctor's name; None when the rules know no such backend
    raised: str | None = None  # the exception's type: 'ValueError', 'ModuleNotFoundError'
    message: str | None = None  # its message (first 400 characters)

    def text(self) -> str:
        """'picks flashinfer-cutlass (FlashInferCutlassNvFp4LinearKernel)', or what it raised."""
        if self.raised is not None:
            return f"raises {self.raised}: {self.message}"
        if self.backend is None:
            return f"picks {self.engine_name}, which fp4doctor's rules do not know"
        return f"picks {self.backend} ({self.engine_name})"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Answer:
        def text(name: str) -> str | None:
            value = data.get(name)
            return None if value is None else str(value)

        return cls(
            key=str(data["key"]),
            engine_name=text("engine_name"),
            backend=text("backend"),
            raised=text("raised"),
            message=text("message"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class EngineAnswers:
    """Everything one worker said: the engine asked, the adapter that asked it, the answers by
    case key, or why it could not be asked (`unasked`: 'could not ask vLLM X: <reason>')."""

    engine: str  # the profile's title: 'vLLM'
    version: str | None
    adapter: str | None = None  # 'vllm_0_24' (the module that asked)
    answers: dict[str, Answer] = field(default_factory=dict)
    unasked: str | None = None
    cases: tuple[Case, ...] = ()

    def answer(self, case: Case) -> Answer | None:
        return self.answers.get(case.key)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}" if self.version else self.engine
