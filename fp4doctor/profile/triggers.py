"""A known bug's trigger: the conditions of the deployment under which it strikes, beyond the
package versions and GPUs its advisory names (profiles/advisories.yaml `trigger:`).

One condition kind per key, in the registry `KINDS` (adding a kind is adding a class there).
Each judges a `Deployment` (for the advisory's family) to HOLDS, RULED_OUT or UNKNOWN and says
how the user settles an unknown one; `SETTLED_BY` names the Deployment field it reads (None: no
input settles it). One condition ruled out clears the advisory; whether one that holds blocks is
the severity policy's call (`rules/severity.py`).

    trigger:
      ep_min: 32                      # expert parallelism of 32 or more (--ep)
      tp_min: 2                       # tensor parallelism of 2 or more (--tp)
      dp_min: 2                       # data parallelism of 2 or more (--data-parallel-size)
      concurrency_min: 2              # more than one request at once (--concurrency)
      autotune: true                  # FlashInfer's autotuner on (--autotune on|off)
      autotune_cache: true            # the release reads back a persistent autotune file
      cuda_graphs: true               # CUDA graphs captured (--cuda-graphs on|off)
      all2all: [deepep_low_latency]   # the MoE all2all backend is one of these
      dtype: [float16]                # the activation dtype is one of these
      experts_min: 64                 # routed experts in the checkpoint (--model)
      experts_max: 39                 # ... at most this many
      model_arch: [Glm4Moe]           # a config.json architecture containing one (--model)
      scheme: w4a4                    # a layer of the family is W4A4 (w4a16: weight-only) (--model)
      k_sf_not_multiple_of: 4         # some GEMM of the family has per-rank K/16 % 4 != 0 (--model)
      k_not_multiple_of: 128          # ... per-rank K % 128 != 0 (--model, --tp, --ep)
      n_not_multiple_of: 128          # ... per-rank N % 128 != 0
      data: "tiny (subnormal) block scales"   # the data or the load: never established
      depends_on: "where the allocator places the route map"   # nothing here can settle it
      always: "the launch check refuses every SM121 call"   # alone: unconditional, with why
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from fp4doctor.deployment import DeployedGemm, Deployment
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
    SETTLED_BY: ClassVar[str | None] = None  # the Deployment field it reads; None: nothing does

    @classmethod
    def parse(cls, node: Node) -> Condition:
        raise NotImplementedError

    def judge(self, deployment: Deployment, family: str | None = None) -> Judged:
        """How it settles for the deployment; `family` is the advisory's (None: any)."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


def _unknown(flag: str) -> Judged:
    return Judged(Settled.UNKNOWN, f"no {flag} given")


class _Field(Condition):
    """A condition on one field of the deployment: unknown while nothing sets it."""

    WHAT: ClassVar[str]
    FIELD: ClassVar[str]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if "FIELD" in cls.__dict__:
            cls.SETTLED_BY = cls.FIELD

    def judge(self, deployment: Deployment, family: str | None = None) -> Judged:
        value = getattr(deployment, self.FIELD)
        if value is None:
            return _unknown(self.SETTLE or self.KEY)
        settled = Settled.HOLDS if self.holds(value) else Settled.RULED_OUT
        return Judged(settled, f"{self.WHAT} {self.shown(value)}")

    def holds(self, value: int | bool | str) -> bool:
        raise NotImplementedError

    def shown(self, value: int | bool | str) -> str:
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

    def holds(self, value: int | bool | str) -> bool:
        return isinstance(value, int) and value >= self.minimum

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


class DpMin(_AtLeast):
    KEY, WHAT, FIELD = "dp_min", "data parallelism", "dp"
    SETTLE = "the engine's --data-parallel-size N"


class ExpertsMin(_AtLeast):
    KEY, SETTLE, WHAT, FIELD = "experts_min", "--model PATH", "routed experts", "experts"


class ExpertsMax(_AtLeast):
    """At most `minimum` routed experts (a kernel path that only few experts reach)."""

    KEY, SETTLE, WHAT, FIELD = "experts_max", "--model PATH", "routed experts", "experts"

    def holds(self, value: int | bool | str) -> bool:
        return isinstance(value, int) and value <= self.minimum

    def describe(self) -> str:
        return f"{self.WHAT} of {self.minimum} or fewer"


@dataclass(frozen=True)
class _Switch(_Field):
    """An engine feature switched on (or off)."""

    on: bool

    @classmethod
    def parse(cls, node: Node) -> Condition:
        return cls(node.boolean())

    def holds(self, value: int | bool | str) -> bool:
        return value == self.on

    def shown(self, value: int | bool | str) -> str:
        return "on" if value else "off"

    def describe(self) -> str:
        return f"{self.WHAT} {self.shown(self.on)}"


class Autotune(_Switch):
    KEY, SETTLE, WHAT, FIELD = "autotune", "--autotune on|off", "FlashInfer autotuning", "autotune"


class CudaGraphs(_Switch):
    KEY, SETTLE, WHAT, FIELD = "cuda_graphs", "--cuda-graphs on|off", "CUDA graphs", "cuda_graphs"


class AutotuneCache(_Switch):
    """The release keeps FlashInfer's tuned tactics in a persistent file and reads them back
    (profiles/coldstart.yaml `autotune`: `cache` other than `none`, the autotuner on)."""

    KEY, SETTLE, FIELD = "autotune_cache", "--autotune on|off", "autotune_cache"
    WHAT = "a persistent autotune file cache"

    def shown(self, value: int | bool | str) -> str:
        return "read back" if value else "not kept (tuned in memory)"

    def describe(self) -> str:
        return self.WHAT if self.on else "no persistent autotune file cache"


@dataclass(frozen=True)
class _OneOf(_Field):
    """A named setting of the deployment that is one of `names`."""

    names: tuple[str, ...]
    CHOICES: ClassVar[tuple[str, ...] | None] = None  # the values a profile may name

    @classmethod
    def parse(cls, node: Node) -> Condition:
        names = node.texts()
        if not names:
            raise node.error("names at least one value")
        if cls.CHOICES is not None:
            for n in node.sequence() if node.is_list() else [node]:
                n.choice(cls.CHOICES)
        return cls(names)

    def holds(self, value: int | bool | str) -> bool:
        return value in self.names

    def describe(self) -> str:
        return f"{self.WHAT} {' or '.join(self.names)}"


class All2All(_OneOf):
    KEY, WHAT, FIELD = "all2all", "all2all backend", "all2all"
    SETTLE = "the engine's --all2all-backend"


class Dtype(_OneOf):
    KEY, WHAT, FIELD = "dtype", "activation dtype", "dtype"
    SETTLE = "the engine's --dtype"
    CHOICES = ("float16", "bfloat16")


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

    SETTLED_BY: ClassVar[str | None] = "architectures"

    def judge(self, deployment: Deployment, family: str | None = None) -> Judged:
        if deployment.architectures is None:
            return _unknown("--model")
        archs = deployment.architectures
        hit = any(n.lower() in a.lower() for n in self.names for a in archs)
        return Judged(Settled.HOLDS if hit else Settled.RULED_OUT, f"a {', '.join(archs)} model")

    def describe(self) -> str:
        return f"a {' or '.join(self.names)} model"


def _family_gemms(deployment: Deployment, family: str | None) -> list[DeployedGemm] | None:
    """The per-rank NVFP4 GEMMs of `family` (of every family for None); None: no model."""
    if deployment.gemms is None:
        return None
    return [g for g in deployment.gemms if family is None or g.family == family]


@dataclass(frozen=True)
class Scheme(Condition):
    """A layer of the advisory's family is of this FP4 scheme: `w4a4` (an FP4 activation
    quantizer runs) or `w4a16` (weight-only). A model that mixes both holds both."""

    scheme: str
    KEY: ClassVar[str] = "scheme"
    SETTLE: ClassVar[str | None] = "--model PATH"
    SETTLED_BY: ClassVar[str | None] = "gemms"
    CHOICES: ClassVar[tuple[str, ...]] = ("w4a4", "w4a16")

    @classmethod
    def parse(cls, node: Node) -> Condition:
        return cls(node.choice(cls.CHOICES))

    def judge(self, deployment: Deployment, family: str | None = None) -> Judged:
        gemms = _family_gemms(deployment, family)
        if gemms is None:
            return _unknown("--model")
        schemes = sorted({g.scheme.lower() for g in gemms})
        settled = Settled.HOLDS if self.scheme in schemes else Settled.RULED_OUT
        which = f"{family} " if family else ""
        return Judged(settled, f"{which}layers {'/'.join(schemes).upper() or 'not NVFP4'}")

    def describe(self) -> str:
        return f"{self.scheme.upper()} layers"


@dataclass(frozen=True)
class _ShapeNotMultiple(Condition):
    """Some per-rank NVFP4 GEMM of the family has a dimension that is not a multiple of `of`."""

    of: int
    WHAT: ClassVar[str]
    SETTLE: ClassVar[str | None] = "--model PATH"
    SETTLED_BY: ClassVar[str | None] = "gemms"

    @classmethod
    def parse(cls, node: Node) -> Condition:
        value = node.integer()
        if value < 2:
            raise node.error("is a divisor: a whole number of 2 or more")
        return cls(value)

    def size(self, gemm: DeployedGemm) -> int:
        raise NotImplementedError

    def judge(self, deployment: Deployment, family: str | None = None) -> Judged:
        gemms = _family_gemms(deployment, family)
        if gemms is None:
            return _unknown("--model")
        bad = [g for g in gemms if self.size(g) % self.of]
        shown = bad or gemms
        sizes = ", ".join(dict.fromkeys(str(self.size(g)) for g in shown)) or "no NVFP4 GEMM"
        settled = Settled.HOLDS if bad else Settled.RULED_OUT
        return Judged(settled, f"per-rank {self.WHAT} {sizes}")

    def describe(self) -> str:
        return f"a per-rank {self.WHAT} not a multiple of {self.of}"


class KSfNotMultipleOf(_ShapeNotMultiple):
    KEY, WHAT = "k_sf_not_multiple_of", "K/16 (scale-factor columns)"

    def size(self, gemm: DeployedGemm) -> int:
        return -(-gemm.k // 16)  # one e4m3 scale per 16 elements of K, the last block padded


class KNotMultipleOf(_ShapeNotMultiple):
    KEY, WHAT = "k_not_multiple_of", "K"

    def size(self, gemm: DeployedGemm) -> int:
        return gemm.k


class NNotMultipleOf(_ShapeNotMultiple):
    KEY, WHAT = "n_not_multiple_of", "N"

    def size(self, gemm: DeployedGemm) -> int:
        return gemm.n


@dataclass(frozen=True)
class DependsOn(Condition):
    """A condition nothing fp4doctor reads can settle (timing, the allocator, the caller's
    own arguments): the bug stays a risk, never an established failure."""

    what: str
    KEY: ClassVar[str] = "depends_on"

    @classmethod
    def parse(cls, node: Node) -> Condition:
        return cls(node.text())

    def judge(self, deployment: Deployment, family: str | None = None) -> Judged:
        return Judged(Settled.UNKNOWN, "nothing fp4doctor reads can tell")

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class Data(Condition):
    """A condition on the data or the load (tiny scales, long prompts, sustained load): no
    input settles it, so the advisory is a warning by nature and says so."""

    what: str
    KEY: ClassVar[str] = "data"

    @classmethod
    def parse(cls, node: Node) -> Condition:
        return cls(node.text())

    def judge(self, deployment: Deployment, family: str | None = None) -> Judged:
        return Judged(Settled.UNKNOWN, "no input settles the data/load")

    def describe(self) -> str:
        return f"depends on the data/load: {self.what}"


@dataclass(frozen=True)
class Always(Condition):
    """An unconditional mechanism (every call on the affected releases and GPUs fails), with
    why: the one way an advisory may have no other trigger condition."""

    why: str
    KEY: ClassVar[str] = "always"

    @classmethod
    def parse(cls, node: Node) -> Condition:
        return cls(node.text())

    def judge(self, deployment: Deployment, family: str | None = None) -> Judged:
        return Judged(Settled.HOLDS, f"on every run ({self.why})")

    def describe(self) -> str:
        return "any run"


KINDS: dict[str, type[Condition]] = {
    k.KEY: k
    for k in (
        EpMin,
        TpMin,
        DpMin,
        ConcurrencyMin,
        ExpertsMin,
        ExpertsMax,
        Autotune,
        AutotuneCache,
        CudaGraphs,
        All2All,
        Dtype,
        ModelArch,
        Scheme,
        KSfNotMultipleOf,
        KNotMultipleOf,
        NNotMultipleOf,
        DependsOn,
        Data,
        Always,
    )
}
# The kinds no input settles: the data or the load, what only the caller decides, and the
# statement that nothing but the versions and GPUs is needed.
UNSETTLED = frozenset({DependsOn.KEY, Data.KEY})


@dataclass(frozen=True)
class Trigger:
    """Every condition must hold for the bug to strike."""

    conditions: tuple[Condition, ...] = ()

    def describe(self) -> str:
        """The conditions in words; a condition on the data or the load comes last, as a clause
        of its own ("W4A4 layers; depends on the data/load: tiny block scales")."""
        plain = " and ".join(c.describe() for c in self.conditions if not isinstance(c, Data))
        data = [c.describe() for c in self.conditions if isinstance(c, Data)]
        return "; ".join(p for p in (plain, *data) if p)

    @property
    def unconditional(self) -> bool:
        return any(isinstance(c, Always) for c in self.conditions)

    @property
    def settleable(self) -> bool:
        """Whether some input could establish every condition (no `data`, no `depends_on`)."""
        return not any(c.KEY in UNSETTLED for c in self.conditions)

    def judge(self, deployment: Deployment, family: str | None = None) -> tuple[Settled, str]:
        """How the trigger settles here for the advisory's `family`, and the words that say why."""
        judged = [(c, c.judge(deployment, family)) for c in self.conditions]
        out = [j for _, j in judged if j.settled is Settled.RULED_OUT]
        if out:
            return Settled.RULED_OUT, "; ".join(j.known for j in out)
        unknown = [(c, j) for c, j in judged if j.settled is Settled.UNKNOWN]
        if not unknown:
            return Settled.HOLDS, "; ".join(j.known for _, j in judged)
        return Settled.UNKNOWN, "; ".join(j.known for _, j in unknown)

    def settle(self, deployment: Deployment, family: str | None = None) -> str | None:
        """What the user can pass to settle the conditions not known here, when anything can."""
        flags = [
            c.SETTLE
            for c in self.conditions
            if c.SETTLE and c.judge(deployment, family).settled is Settled.UNKNOWN
        ]
        return ", ".join(dict.fromkeys(flags)) or None


def parse(node: Node) -> Trigger:
    """A `trigger:` mapping; an unknown key is an error naming the valid ones."""
    fields = node.mapping(tuple(KINDS))
    if not fields:
        raise node.error(f"names at least one condition (valid: {', '.join(KINDS)})")
    if Always.KEY in fields and len(fields) > 1:
        raise fields[Always.KEY].error("stands alone: an unconditional bug has no other condition")
    return Trigger(tuple(KINDS[key].parse(value) for key, value in fields.items()))
