"""What a profile says, as typed data: backends and their requirements, engine eras and knobs.

The YAML shape is documented in docs/profiles.md; `schema.py` turns YAML into these objects and
is the only place that knows the YAML spelling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet

from fp4doctor.profile.kinds.base import Requirement
from fp4doctor.profile.kinds.compute_capability import ComputeCapability
from fp4doctor.profile.knobs import STYLES, KnobKind
from fp4doctor.profile.triggers import Trigger

# What a known problem does: a crash, a wrong output or a hang makes the backend unusable (once
# its trigger is established), `slow` only warns. The first four are `findings.Symptom`s.
EFFECT_CRASH = "crash"
EFFECT_WRONG_OUTPUT = "wrong-output"
EFFECT_HANG = "hang"
EFFECT_SLOW = "slow"
EFFECT_WARN = "warn"  # a profile's own advisory that states no effect
SYMPTOMS = (EFFECT_CRASH, EFFECT_WRONG_OUTPUT, EFFECT_HANG, EFFECT_SLOW)
EFFECTS = (*SYMPTOMS, EFFECT_WARN)


@dataclass(frozen=True)
class Advisory:
    """A known problem of a backend: when every condition holds, a finding. A crash or a wrong
    output fails the backend (an engine that picks it is not ready); `slow` and `warn` warn."""

    id: str
    conditions: tuple[Requirement, ...]
    reason: str
    fix: str | None = None
    source: str | None = None
    effect: str = EFFECT_WARN
    shapes: str | None = None  # when it depends on shapes or dtypes, in words
    fixed_in: str | None = None  # the first release of the bad package with the fix
    trigger: Trigger = field(default_factory=Trigger)  # none: it strikes on any run
    alternatives: tuple[str, ...] = ()  # backends to use instead, named in a fix where valid
    # How far the known-bug entry's source was read (profile/advisories.py EVIDENCE); None for a
    # profile's own advisory, which its author states as a rule.
    evidence: str | None = None

    @property
    def per_gpu(self) -> bool:
        return any(c.per_gpu for c in self.conditions)

    @property
    def blocking(self) -> bool:
        return self.effect in (EFFECT_CRASH, EFFECT_WRONG_OUTPUT, EFFECT_HANG)


# The FP4 GEMM families an engine runs: the dense linear layers and the fused MoE experts. Each
# has its own backends, knobs and automatic order, and is judged and resolved on its own.
FAMILY_LINEAR = "linear"
FAMILY_MOE = "moe"
FAMILIES = (FAMILY_LINEAR, FAMILY_MOE)
FAMILY_TITLES = {FAMILY_LINEAR: "dense linear FP4 GEMM", FAMILY_MOE: "fused-MoE FP4 GEMM"}


@dataclass(frozen=True)
class Backend:
    """One FP4 GEMM backend: what it needs, its live checks, its names."""

    name: str
    summary: str
    native: bool
    aliases: tuple[str, ...] = ()
    smoke: tuple[str, ...] = ()  # smoke adapter names that exercise this backend's library call
    requires: tuple[Requirement, ...] = ()
    advisories: tuple[Advisory, ...] = ()
    family: str = FAMILY_LINEAR


# Knob kinds: how a user tells the engine which backend to use.
KNOB_ENV, KNOB_CLI, KNOB_CONFIG, KNOB_ARGUMENT = KnobKind  # the kinds, by their names here
KNOB_KINDS = tuple(k.value for k in KnobKind)


@dataclass(frozen=True)
class Knob:
    """One way to select backends in an era: an env var, a CLI flag, a config key or an argument.

    `values` maps each backend this knob can select to its spellings; the first is the one to
    write, the others are accepted when linting what a user set. `only_on` limits a backend to
    the GPUs where the engine's own code maps the spelling to it: on other GPUs the same
    spelling selects the next backend that lists it (vLLM 0.12-0.21's
    VLLM_USE_FLASHINFER_MOE_FP4=1 is TRT-LLM on the SM10x family, CUTLASS elsewhere). The engine
    asks GPU 0 (`current_platform.get_device_capability()`), so `cc` is the first GPU's.
    """

    kind: KnobKind
    name: str
    values: dict[str, tuple[str, ...]]
    type: str = "choice"  # "choice" | "bool"
    bool_style: str = "int"  # how the engine parses a bool: "int" (int(v)) | "word" (true/1)
    case_sensitive: bool = True
    deprecated: str | None = None
    select: bool = True  # False for knobs with side effects beyond the backend choice
    note: str | None = None
    on_invalid: str | None = None
    source: str | None = None
    # Variables that must be set with it for it to be read at all (vLLM reads
    # VLLM_FLASHINFER_MOE_BACKEND only with VLLM_USE_FLASHINFER_MOE_FP4=1): (name, value).
    also: tuple[tuple[str, str], ...] = ()
    # Variables written with this knob for one backend only (backend, name, value): vLLM's
    # `--linear-backend=flashinfer_cutedsl` names both CuTe-DSL kernels and runs the W4A16 one
    # only with VLLM_DISABLED_KERNELS naming the W4A4 one.
    with_env: tuple[tuple[str, str, str], ...] = ()
    # Flags written with this CLI knob for one backend only (backend, flag, value): SGLang
    # 0.5.11+ accepts `--moe-runner-backend flashinfer_cutedsl` only with `--quantization
    # modelopt_fp4` given.
    with_args: tuple[tuple[str, str, str], ...] = ()
    scalar: bool = False  # a config key that takes one value (moe_config.backend), not a list
    # Values the engine accepts that name no kernel of this family (vLLM's --linear-backend
    # triton for an NVFP4 layer), and what it does with them: "auto" (its automatic pick, the
    # flag silently dropped) or "raises" (it stops at start-up).
    no_kernel: tuple[str, ...] = ()
    no_kernel_then: str | None = None
    # A value naming several backends: the engine takes the first, in its automatic order, that
    # is supported here (vLLM filters its kernel registry by --linear-backend and walks what is
    # left), rather than the first named.
    walk: bool = False
    # (backend, the compute capabilities where this knob's spellings select it)
    only_on: tuple[tuple[str, ComputeCapability], ...] = ()

    def selects_on(self, backend: str, cc: int | None) -> bool:
        """Whether the knob's spellings for `backend` select it on a GPU of `cc` (None: no GPU
        known, where every mapping is taken as written)."""
        limit = dict(self.only_on).get(backend)
        return limit is None or cc is None or limit.accepts(cc)

    def shadowed(self, backend: str) -> bool:
        """Whether the spelling written for `backend` selects another backend on some GPUs
        (a GPU-limited backend listed before it with the same spelling)."""
        limited = dict(self.only_on)
        written = self.values[backend][0]
        for other, spellings in self.values.items():
            if other == backend:
                return False
            if other in limited and written in spellings:
                return True
        return False

    def env_for(self, backend: str) -> tuple[tuple[str, str], ...]:
        """The variables written with this knob when it selects `backend`."""
        return (*self.also, *((n, v) for b, n, v in self.with_env if b == backend))

    def args_for(self, backend: str) -> tuple[tuple[str, str], ...]:
        """The flags written with this knob when it selects `backend`."""
        return tuple((f, v) for b, f, v in self.with_args if b == backend)

    def backends_for(self, value: str) -> list[str]:
        """Every backend a set value names, in the knob's order (vLLM's `--linear-backend
        flashinfer_cutedsl` names the W4A4 and the W4A16 CuTe-DSL kernels)."""
        return [
            b
            for b, spellings in self.values.items()
            if any(value == s or (not self.case_sensitive and value.lower() == s.lower())
                   for s in spellings)
        ]  # fmt: skip

    def names_no_kernel(self, value: str) -> bool:
        """Whether `value` is one the engine accepts with no kernel of this family."""
        return any(value.lower() == v.lower() if not self.case_sensitive else value == v
                   for v in self.no_kernel)  # fmt: skip

    def backend_for(self, value: str, cc: int | None = None) -> str | None:
        """Which backend a set value selects on a GPU of `cc` (None for an unknown value)."""
        for backend, spellings in self.values.items():
            if not self.selects_on(backend, cc):
                continue
            for s in spellings:
                if value == s or (not self.case_sensitive and value.lower() == s.lower()):
                    return backend
        return None

    def backend_when_on(self, cc: int | None = None) -> str | None:
        """Which backend a bool knob switched on selects on a GPU of `cc`."""
        return next((b for b in self.values if self.selects_on(b, cc)), None)

    def accepted(self) -> list[str]:
        return list(dict.fromkeys(s for spellings in self.values.values() for s in spellings))

    def how(self, backend: str) -> str:
        """How a user writes this knob for `backend`, for messages."""
        return STYLES[KnobKind(self.kind)].message(self.name, self.values[backend][0], self.scalar)


@dataclass(frozen=True)
class AutoStep:
    """One step of the engine's own automatic order: `backend` when every condition holds."""

    backend: str
    conditions: tuple[Requirement, ...] = ()


@dataclass(frozen=True)
class Modifier:
    """A variable the engine's selection reads beside its knobs, which changes what it runs
    without selecting a backend itself (profiles: an era's `modifiers`):
    - `disables`: a comma-separated list of the engine's kernel names; a backend whose name is
      listed is passed over in the engine's walk (vLLM's VLLM_DISABLED_KERNELS);
    - `replaces`: when set to one of `values` (case-insensitive), the backend the engine would
      run is swapped for another (SGLang's SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=1 runs the
      flashinfer_cutedsl FP4 GEMM weight-only).
    fp4doctor writes one only where a knob's `with_env` needs it; `env` unsets it otherwise."""

    env: str
    disables: dict[str, str] = field(default_factory=dict)  # backend -> the engine's name
    values: tuple[str, ...] = ()  # the spellings that turn a `replaces` modifier on
    replaces: dict[str, str] = field(default_factory=dict)  # backend -> what runs instead
    source: str | None = None

    def disabled(self, env: Mapping[str, str]) -> dict[str, str]:
        """The backends `env` disables (backend -> the name listed)."""
        listed = {n.strip() for n in env.get(self.env, "").split(",") if n.strip()}
        return {b: n for b, n in self.disables.items() if n in listed}

    def replacing(self, env: Mapping[str, str]) -> dict[str, str]:
        """What `env` swaps (backend -> backend), when it turns this modifier on."""
        value = env.get(self.env)
        if value is None or value.lower() not in {v.lower() for v in self.values}:
            return {}
        return dict(self.replaces)


@dataclass(frozen=True)
class Era:
    """A range of engine versions that share knobs and automatic order."""

    versions: SpecifierSet
    knobs: tuple[Knob, ...]  # highest precedence first
    auto: tuple[AutoStep, ...]
    conflicts: tuple[str, ...] = ()  # variables to unset whatever is chosen
    reads: tuple[str, ...] = ()  # other FP4 variables this era reads (for the lint)
    modifiers: tuple[Modifier, ...] = ()  # variables that change the walk or what runs
    note: str | None = None
    source: str | None = None
    line: int = 0
    # The other families' knobs and automatic order over the same versions (the era's own
    # fields are the linear family's): (family, era), each inheriting from the era before.
    families: tuple[tuple[str, Era], ...] = ()

    def of_family(self, family: str) -> Era | None:
        """This era as one family sees it; None when the era says nothing of that family."""
        if family == FAMILY_LINEAR:
            return self
        return dict(self.families).get(family)

    def selecting_knob(self, backend: str) -> Knob | None:
        """The knob to write for `backend`: a settable general selector (a choice knob) before
        a single-backend switch, and a deprecated knob only when nothing else works."""
        usable = [k for k in self.knobs if k.select and backend in k.values]
        usable.sort(
            key=lambda k: (k.shadowed(backend), k.deprecated is not None, k.type != "choice")
        )
        return usable[0] if usable else None

    def env_knobs(self) -> list[Knob]:
        return [k for k in self.knobs if k.kind == KNOB_ENV]

    def read_variables(self) -> set[str]:
        return {k.name for k in self.env_knobs()} | set(self.reads) | self.modifier_variables()

    def modifier_variables(self) -> set[str]:
        """The variables of the era's modifiers: they steer the choice, so `env` writes them
        only where a knob needs them and unsets them otherwise."""
        return {m.env for m in self.modifiers}

    def disabled(self, env: Mapping[str, str]) -> dict[str, tuple[str, str]]:
        """backend -> (variable, the name it lists) for each backend `env` disables."""
        return {b: (m.env, n) for m in self.modifiers for b, n in m.disabled(env).items()}

    def replaced(self, backend: str | None, env: Mapping[str, str]) -> tuple[str | None, str]:
        """What runs instead of `backend` under `env`'s modifiers, and the variable that swaps
        it ('' when none does)."""
        for m in self.modifiers:
            instead = m.replacing(env).get(backend or "")
            if instead is not None:
                return instead, m.env
        return backend, ""


FAMILIES_EVERY = "every"
FAMILIES_ASKED = "asked"
FAMILIES_RUN = (FAMILIES_EVERY, FAMILIES_ASKED)


@dataclass(frozen=True)
class Engine:
    """The engine a profile judges: the package whose version picks the era, and what it needs."""

    package: str  # distribution whose version picks the era
    newest_known: str
    args_variable: str | None = None
    config_format: str = "dotenv"  # "vllm-yaml" | "sglang-yaml" | "trtllm-yaml" | "dotenv"
    # The first release that reads that config file (None: every release the profile knows);
    # before it `config` writes a dotenv file. Where the format and the boundary come from.
    config_from: str | None = None
    config_source: str | None = None
    # Which families a deployment runs when neither --family nor --model says: FAMILIES_EVERY
    # (an engine runs whatever the model has: every family must be ready), FAMILIES_ASKED (a
    # library used directly: each family is its own entry point, counted only when asked).
    families: str = "every"
    # What the engine itself needs to start, whatever backend it uses (a failure here stops
    # every backend: the host is not ready).
    requires: tuple[Requirement, ...] = ()
    # The newest release of each package whose rules were read from released source (the
    # engine's own, `newest_known`, and a library's whose rules the profile includes, e.g.
    # FlashInfer's): an installed release newer than it is judged by extrapolation, unverified.
    newest_read: tuple[tuple[str, str], ...] = ()
    # Engine releases whose FlashInfer pin the package index lacks (release -> requirement):
    # `pip install` of them fails from the index alone (profiles/releases.yaml).
    unavailable_pins: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Variable:
    """An FP4 variable users set for this engine, with what to say when an era ignores it."""

    name: str
    note: str
    means: str | None = None  # the backend a user means by setting it to a true value
    family: str = FAMILY_LINEAR
    # Engine versions that refuse to start while it is set (vLLM 0.34's
    # removed_environment_variables): an error, not an ignored variable; the versions before
    # them read it.
    removed: SpecifierSet | None = None


@dataclass(frozen=True)
class Profile:
    """One engine's rules: backends in order of preference, eras, variables."""

    target: str
    title: str
    engine: Engine
    backends: dict[str, Backend]  # in order of general preference, best first
    eras: tuple[Era, ...]
    variables: dict[str, Variable] = field(default_factory=dict)
    includes: tuple[str, ...] = ()  # shared modules (profiles/common/) its conditions come from
    source: str | None = None
    path: str = "<profile>"
    family: str | None = None  # set on one family's view (`view`); None: the whole file

    def families(self) -> list[str]:
        """The FP4 GEMM families this profile describes, linear first: those with backends."""
        present = {b.family for b in self.backends.values()}
        return [f for f in FAMILIES if f in present]

    def view(self, family: str) -> Profile:
        """The profile as one family sees it: its backends, its variables, and each era's knobs
        and automatic order for it (an era that says nothing of it has none). The variables the
        other families' knobs read count as read, so the lint leaves them to their own family."""
        if self.family is not None:
            if self.family != family:
                raise ValueError(f"a {self.family} view has no {family} family")
            return self
        eras = []
        for era in self.eras:
            own = era.of_family(family) or Era(versions=era.versions, knobs=(), auto=())
            others: set[str] = set()
            for name, sub in ((FAMILY_LINEAR, era), *era.families):
                if name != family:
                    others |= sub.read_variables()
            reads = (*own.reads, *sorted(others - set(own.reads)))
            eras.append(
                dataclasses.replace(
                    own, versions=era.versions, line=era.line, families=(), reads=reads
                )
            )
        return dataclasses.replace(
            self,
            backends={n: b for n, b in self.backends.items() if b.family == family},
            eras=tuple(eras),
            variables={n: v for n, v in self.variables.items() if v.family == family},
            family=family,
        )

    def requirements(self) -> list[Requirement]:
        """Every top-level rule: the engine's, the backends' and their advisories', and the
        automatic orders' conditions (nested ones are reached through `children`)."""
        reqs: list[Requirement] = list(self.engine.requires)
        for backend in self.backends.values():
            reqs.extend(backend.requires)
            for advisory in backend.advisories:
                reqs.extend(advisory.conditions)
        for era in self.eras:
            for sub in (era, *(e for _, e in era.families)):
                for step in sub.auto:
                    reqs.extend(step.conditions)
        return reqs

    def packages(self) -> set[str]:
        """Every distribution the profile's rules read: the probe looks each of them up."""
        names = {self.engine.package}
        for req in self.requirements():
            names |= req.packages()
        return names

    def backend_names(self) -> list[str]:
        return list(self.backends)

    def lookup(self, name: str) -> Backend | None:
        """A backend by name or alias (`cudnn` -> `flashinfer-cudnn`), in any case."""
        wanted = name.lower()
        for b in self.backends.values():
            if wanted == b.name or wanted in b.aliases:
                return b
        return None

    def choices(self) -> list[str]:
        """Every name `--prefer`/`--require` accepts, for error messages."""
        names = []
        for b in self.backends.values():
            names.append(b.name)
            names.extend(b.aliases)
        return names
