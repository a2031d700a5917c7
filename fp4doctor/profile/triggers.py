"""A known bug's trigger: the conditions of the deployment under which it strikes, beyond the
package versions and GPUs its advisory names (profiles/advisories.yaml `trigger:`).

One condition kind per key, in the registry `KINDS` (adding a kind is adding a class there).
Each judges a `Deployment` to HOLDS, RULED_OUT or UNKNOWN and says how the user settles an
unknown one. An advisory fails a verdict only when every condition of its trigger holds; one
ruled out clears it; otherwise it warns, naming what is not known.

    trigger:
      ep_min: 32                      # expert parallelism of 32 or more (--ep)
      tp_min: 2                       # tensor parallelism of 2 or more (--tp)
      concurrency_min: 2              # more than one request at once (--concurrency)
      autotune: true                  # FlashInfer's autotuner on (--autotune on|off)
      cuda_graphs: true               # CUDA graphs captured (--cuda-graphs on|off)
      experts_min: 64                 # routed experts in the checkpoint (--model)
      model_arch: [Glm4Moe]           # a config.json architecture containing one (--model)
      depends_on: "where the allocator places the route map"   # nothing here can settle it
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from fp4doctor.deployment import Deployment
from fp4doctor.profile.yamlnode import Node


class Settled(enum.Enum):
    HOLDS = "holds"
    RULED_OUT = "ruled out"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Judged:
    """One condition judged: how it settled, and what was known (`EP 4`, `no --ep given`)."""

    settled: Settled
    known: str


class Condition:
    """One condition of a trigger. A kind sets KEY and implements parse, judge and describe."""

    KEY: ClassVar[str]
    SETTLE: ClassVar[str | None] = None  # the flag that settles it, when one does

    @classmethod
    def parse(cls, node: Node) -> Condition:
        raise NotImplementedError

    def judge(self, deployment: Deployment) -> Judged:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


def _unknown(flag: str) -> Judged:
    return Judged(Settled.UNKNOWN, f"no {flag} given")


class _Field(Condition):
    """A condition on one field of the deployment: unknown while nothing sets it."""

    WHAT: ClassVar[str]
    FIELD: ClassVar[str]

    def judge(self, deployment: Deployment) -> Judged:
        value = getattr(deployment, self.FIELD)
        if value is None:
            return _unknown(self.SETTLE or self.KEY)
        settled = Settled.HOLDS if self.holds(value) else Settled.RULED_OUT
        return Judged(settled, f"{self.WHAT} {self.shown(value)}")

    def holds(self, value: int | bool) -> bool:
        raise NotImplementedError

    def shown(self, value: int | bool) -> str:
        return str(value)


@dataclass(frozen=True)
class _AtLeast(_Field):
    """A size of the deployment of at least `minimum`."""

    minimum: int

    @classmethod
    def parse(cls, node: Node) -> Condition:
        value = node.integer()
        if value < 1:
            raise node.error("is a size: a whole number of 1 or more")
        return cls(value)

    def holds(self, value: int | bool) -> bool:
        return value >= self.minimum

    def describe(self) -> str:
        return f"{self.WHAT} of {self.minimum} or more"


class EpMin(_AtLeast):
    KEY, SETTLE, WHAT, FIELD = "ep_min", "--ep N", "expert parallelism", "ep"


class TpMin(_AtLeast):
    KEY, SETTLE, WHAT, FIELD = "tp_min", "--tp N", "tensor parallelism", "tp"


class ConcurrencyMin(_AtLeast):
    KEY, SETTLE, WHAT, FIELD = "concurrency_min", "--concurrency N", "concurrency", "concurrency"

    def describe(self) -> str:
        return "concurrent requests" if self.minimum == 2 else super().describe()


class ExpertsMin(_AtLeast):
    KEY, SETTLE, WHAT, FIELD = "experts_min", "--model PATH", "routed experts", "experts"


@dataclass(frozen=True)
class _Switch(_Field):
    """An engine feature switched on (or off)."""

    on: bool

    @classmethod
    def parse(cls, node: Node) -> Condition:
        return cls(node.boolean())

    def holds(self, value: int | bool) -> bool:
        return value == self.on

    def shown(self, value: int | bool) -> str:
        return "on" if value else "off"

    def describe(self) -> str:
        return f"{self.WHAT} {self.shown(self.on)}"


class Autotune(_Switch):
    KEY, SETTLE, WHAT, FIELD = "autotune", "--autotune on|off", "FlashInfer autotuning", "autotune"


class CudaGraphs(_Switch):
    KEY, SETTLE, WHAT, FIELD = "cuda_graphs", "--cuda-graphs on|off", "CUDA graphs", "cuda_graphs"


@dataclass(frozen=True)
class ModelArch(Condition):
    """A checkpoint whose config.json architecture contains one of the names (`Glm4Moe`)."""

    names: tuple[str, ...]
    KEY: ClassVar[str] = "model_arch"
    SETTLE: ClassVar[str | None] = "--model PATH"

    @classmethod
    def parse(cls, node: Node) -> Condition:
        names = node.texts()
        if not names:
            raise node.error("names at least one architecture")
        return cls(names)

    def judge(self, deployment: Deployment) -> Judged:
        if deployment.architectures is None:
            return _unknown("--model")
        archs = deployment.architectures
        hit = any(n.lower() in a.lower() for n in self.names for a in archs)
        return Judged(Settled.HOLDS if hit else Settled.RULED_OUT, f"a {', '.join(archs)} model")

    def describe(self) -> str:
        return f"a {' or '.join(self.names)} model"


@dataclass(frozen=True)
class DependsOn(Condition):
    """A condition nothing fp4doctor reads can settle (timing, the allocator, the caller's
    own arguments): the bug stays a risk, never an established failure."""

    what: str
    KEY: ClassVar[str] = "depends_on"

    @classmethod
    def parse(cls, node: Node) -> Condition:
        return cls(node.text())

    def judge(self, deployment: Deployment) -> Judged:
        return Judged(Settled.UNKNOWN, "nothing fp4doctor reads can tell")

    def describe(self) -> str:
        return self.what


KINDS: dict[str, type[Condition]] = {
    k.KEY: k
    for k in (EpMin, TpMin, ConcurrencyMin, ExpertsMin, Autotune, CudaGraphs, ModelArch, DependsOn)
}


@dataclass(frozen=True)
class Trigger:
    """Every condition must hold for the bug to strike."""

    conditions: tuple[Condition, ...] = ()

    def describe(self) -> str:
        return " and ".join(c.describe() for c in self.conditions)

    def judge(self, deployment: Deployment) -> tuple[Settled, str]:
        """How the trigger settles here, and the words that say why."""
        judged = [(c, c.judge(deployment)) for c in self.conditions]
        out = [j for _, j in judged if j.settled is Settled.RULED_OUT]
        if out:
            return Settled.RULED_OUT, "; ".join(j.known for j in out)
        unknown = [(c, j) for c, j in judged if j.settled is Settled.UNKNOWN]
        if not unknown:
            return Settled.HOLDS, "; ".join(j.known for _, j in judged)
        return Settled.UNKNOWN, "; ".join(j.known for _, j in unknown)

    def settle(self) -> str | None:
        """What the user can pass to settle the unknown conditions, when anything can."""
        flags = [c.SETTLE for c in self.conditions if c.SETTLE]
        return ", ".join(dict.fromkeys(flags)) or None


def parse(node: Node) -> Trigger:
    """A `trigger:` mapping; an unknown key is an error naming the valid ones."""
    fields = node.mapping(tuple(KINDS))
    if not fields:
        raise node.error(f"names at least one condition (valid: {', '.join(KINDS)})")
    return Trigger(tuple(KINDS[key].parse(value) for key, value in fields.items()))
