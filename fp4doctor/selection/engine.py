"""What the engine runs an FP4 GEMM family on when left alone (no knob set), and why it passes
over each candidate before it: for the family as a whole, and for each layer class of a model.

One answer for every reader: what runs as set and the choice's order (selection/choice.py), the
model's "cannot run this model" finding (selection/model.py) and `fp4doctor explain`
(selection/explain.py). Pure.

Which candidates the engine walks depends on the layers:
- the era's automatic order (the profile's `auto`), a step taken when its conditions hold, less
  the backends the engine passes over for the model itself (`Evaluation.skips`: the MoE
  activation, a SwiGLU clamp, weight-only experts);
- weight-only (W4A16) layers of the linear family instead go down the release's own weight-only
  branch (profiles/shapes.yaml `weight_only`, `pick`): vLLM forces Marlin up to 0.29, the
  CuTe-DSL W4A16 kernel on SM100/103 from 0.30, and tries Humming first on SM90 from 0.32.
The first candidate taken is the pick; it "fails" when it cannot run here (a host rule, a known
bug) or cannot run the layer (a per-rank shape), and the engine then stops at model load.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fp4doctor.findings import Finding
from fp4doctor.profile.model import FAMILY_LINEAR, KNOB_CLI, AutoStep
from fp4doctor.rules.backends import conditions_hold, requirement_findings
from fp4doctor.settle import engine_flags

if TYPE_CHECKING:
    from fp4doctor.checkpoint.constraints import PickStep, WeightOnly
    from fp4doctor.checkpoint.judge import ModelVerdict
    from fp4doctor.checkpoint.parallel import RankGemm
    from fp4doctor.profile.kinds.base import Requirement
    from fp4doctor.rules import Evaluation

# A backend's blocking findings of one kind (the model's, or the host's).
Lookup = Callable[[str], Sequence[Finding]]


_KEPT = "_fp4doctor_engine_pick"  # where family_pick keeps its answer on an evaluation


class Status(enum.Enum):
    """What the engine does with one candidate."""

    SKIPPED = "skipped"
    PICKED = "picked"
    FAILS = "picked, fails"


@dataclass(frozen=True)
class Candidate:
    """One backend the engine considers, in its order, and what it does with it."""

    backend: str
    status: Status
    reason: str
    finding: Finding | None = None  # what skips it or makes it fail; None when it runs

    def to_dict(self) -> dict[str, str]:
        return {"backend": self.backend, "status": self.status.value, "reason": self.reason}


@dataclass(frozen=True)
class Pick:
    """The engine's choice for a family (`layer` None) or for one layer class of a model."""

    family: str
    weight_only: bool  # the layers are W4A16: the engine's weight-only branch
    candidates: tuple[Candidate, ...]  # up to and including the one taken
    # Every backend the engine would take here, in its order (steps that hold, the model's
    # skips left out): what the resolver prefers among the valid ones.
    order: tuple[str, ...]
    layer: str | None = None
    known: bool = True  # False: fp4doctor does not know how this release picks for such layers
    kernels: tuple[str, ...] = ()  # weight-only: the only kernels that can run such layers
    source: str | None = None  # where the weight-only branch was read

    @property
    def chosen(self) -> Candidate | None:
        """The candidate the engine takes (it may fail); None when it takes none."""
        return next((c for c in self.candidates if c.status is not Status.SKIPPED), None)

    @property
    def backend(self) -> str | None:
        chosen = self.chosen
        return chosen.backend if chosen is not None else None

    @property
    def passed_over(self) -> tuple[Candidate, ...]:
        return tuple(c for c in self.candidates if c.status is Status.SKIPPED)

    @property
    def fails(self) -> bool:
        """The engine, left alone, stops on these layers: its pick cannot run them, or it
        passes over every candidate."""
        chosen = self.chosen
        if chosen is not None:
            return chosen.status is Status.FAILS
        return self.known and bool(self.candidates)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "layer": self.layer,
            "weight_only": self.weight_only,
            "backend": self.backend,
            "known": self.known,
            "candidates": [c.to_dict() for c in self.candidates],
        }


def family_pick(evaluation: Evaluation) -> Pick:
    """The engine's pick for the family as a whole (its verdicts hold the model's findings,
    when a model was folded in). Weight-only when every FP4 layer of the family is. Worked out
    once per evaluation: kept on it as `functools.cached_property` keeps a value (a new
    evaluation, such as the model's fold, works it out anew)."""
    kept = evaluation.__dict__.get(_KEPT)
    if isinstance(kept, Pick):
        return kept
    walk = _walk(evaluation, evaluation.weight_only)
    picked = walk.pick(lambda b: (), _problems(evaluation), None)
    evaluation.__dict__[_KEPT] = picked
    return picked


def engine_auto(evaluation: Evaluation) -> str | None:
    """The backend the engine, left alone, runs the family on."""
    return family_pick(evaluation).backend


def engine_as_set(evaluation: Evaluation) -> str | None:
    """What the engine runs this family on with the variables set here: the backend they
    select, else its own pick; swapped where a modifier set says (the era's `modifiers`:
    SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=1 runs flashinfer_cutedsl weight-only)."""
    selection = evaluation.env_selection
    picked = selection.backend if selection else engine_auto(evaluation)
    return evaluation.era.replaced(picked, evaluation.context.env)[0]


def as_set(evaluation: Evaluation, args: Sequence[str] | None = None) -> str | None:
    """What the engine runs the family on with the variables set here and the command-line
    arguments `args` ('--flag=value' or '--flag', 'value'; None: the engine flags the
    evaluation was judged with, `Context.args`); None when it stops at start-up.

    A CLI knob given decides (vLLM's --linear-backend wins over its variables): its value's
    backends, the first named or, for a knob that `walk`s, the first in the engine's automatic
    order that is supported here and not disabled (vLLM's `flashinfer_cutedsl` on SM12x W4A4
    layers reaches the CuTe-DSL W4A16 kernel); a value that names no kernel of the family
    (`no_kernel`) is dropped for the engine's own pick ("auto": vLLM's --linear-backend triton
    from 0.28) or stops it ("raises"). Otherwise the variables as set decide
    (`engine_as_set(Evaluation)`). The era's modifiers then swap what runs."""
    era, env = evaluation.era, evaluation.context.env
    given = evaluation.context.args if args is None else engine_flags(args)
    for knob in era.knobs:
        if knob.kind != KNOB_CLI or knob.name not in given:
            continue
        value = given[knob.name]
        named = knob.backends_for(value)
        if named:
            picked = _walk_named(evaluation, named) if knob.walk else named[0]
            return era.replaced(picked, env)[0]
        if knob.names_no_kernel(value) and knob.no_kernel_then == "raises":
            return None
    return engine_as_set(evaluation)


def _walk_named(evaluation: Evaluation, named: Sequence[str]) -> str:
    """The first of `named`, in the engine's automatic order (then the knob's), whose
    conditions hold here and that no modifier disables; the first named when none does (the
    engine takes it, and it fails)."""
    disabled = evaluation.era.disabled(evaluation.context.env)
    steps = [a for a in evaluation.era.auto if a.backend in named]
    steps += [AutoStep(b) for b in named if all(a.backend != b for a in steps)]
    for step in steps:
        if step.backend in disabled or step.backend not in evaluation.verdicts:
            continue
        if conditions_hold(step.conditions, evaluation.context):
            return step.backend
    return named[0]


def layer_picks(evaluation: Evaluation, model: ModelVerdict) -> tuple[tuple[RankGemm, Pick], ...]:
    """Each FP4 layer class of the model in this family, with the engine's pick for it: the
    family's order (or its weight-only branch for a W4A16 layer), failing where that layer's
    per-rank shape does."""
    from fp4doctor.checkpoint.layers import SCHEME_W4A16

    walks: dict[bool, _Walk] = {}
    problems = _problems(evaluation)
    out = []
    for g in model.gemms:
        if not g.layer.fp4 or g.layer.family != evaluation.family:
            continue
        name = g.layer.name

        def own(backend: str, name: str = name) -> Sequence[Finding]:
            found = (*model.backend_findings(backend, name),
                     *model.backend_findings(backend, FAMILY_LINEAR))  # fmt: skip
            return [f for f in found if f.status.blocking]

        def host(backend: str) -> Sequence[Finding]:
            mine = model.per_backend.get(backend, ())
            return [p for p in problems(backend) if p not in mine]

        weight_only = g.layer.scheme == SCHEME_W4A16
        if weight_only not in walks:
            walks[weight_only] = _walk(evaluation, weight_only)
        walk = walks[weight_only]
        out.append((g, walk.pick(own, host, name)))
    return tuple(out)


def _problems(evaluation: Evaluation) -> Lookup:
    def problems(backend: str) -> Sequence[Finding]:
        verdict = evaluation.verdicts.get(backend)
        return verdict.problems() if verdict is not None else []

    return problems


@dataclass(frozen=True)
class _Step:
    """A candidate as the engine meets it here: passed over (`skip`), or taken."""

    backend: str
    skip: Candidate | None = None
    runs: str = ""  # what is said when it is taken and runs
    verb: str = ""  # "vLLM 0.33.0 picks it", "... forces it for weight-only layers"


@dataclass(frozen=True)
class _Walk:
    """The engine's candidates for one kind of layer of a family, before any layer's shapes."""

    family: str
    weight_only: bool
    steps: tuple[_Step, ...]
    order: tuple[str, ...]
    entry: WeightOnly | None
    known: bool = True

    def pick(self, own: Lookup, host: Lookup, layer: str | None) -> Pick:
        candidates: list[Candidate] = []
        for step in self.steps:
            if step.skip is not None:
                if not any(c.backend == step.backend for c in candidates):
                    candidates.append(step.skip)
                continue
            b = step.backend
            candidates.append(_decide(b, own(b), host(b), step.runs, step.verb))
            break
        entry = self.entry
        return Pick(
            self.family, self.weight_only, tuple(candidates), self.order, layer,
            known=self.known, kernels=entry.backends if entry else (),
            source=entry.cited if entry else None,
        )  # fmt: skip


def _walk(evaluation: Evaluation, weight_only: bool) -> _Walk:
    family = evaluation.family
    if not evaluation.facts.gpus:  # the engine stops before it chooses
        return _Walk(family, weight_only, (), (), None)
    entry = _entry(evaluation) if weight_only else None
    # The linear family's weight-only layers go down the release's weight-only branch; an
    # experts entry with its own `pick` too (SGLang's compressed-tensors W4A16 experts: Marlin).
    if weight_only and (family == FAMILY_LINEAR or (entry is not None and entry.pick)):
        if entry is None:
            return _Walk(family, True, (), (), None, known=False)
        return _weight_only(evaluation, entry)
    label = evaluation.engine_label
    ctx = evaluation.context
    disabled = evaluation.era.disabled(ctx.env)
    steps: list[_Step] = []
    order: list[str] = []
    for auto in evaluation.era.auto:
        b = auto.backend
        if b not in evaluation.verdicts:
            continue
        if b in disabled:
            steps.append(_Step(b, Candidate(b, Status.SKIPPED, _disabled(disabled[b]))))
            continue
        skip = evaluation.skips.get(b)
        if not conditions_hold(auto.conditions, ctx) or skip is not None:
            why = skip or _unmet(auto.conditions, evaluation, b)
            reason = why.reason if why else "its condition in the automatic order does not hold"
            steps.append(_Step(b, Candidate(b, Status.SKIPPED, reason, why)))
            continue
        if b not in order:
            order.append(b)
            steps.append(
                _Step(b, runs=f"the first in {label}'s automatic order that runs here",
                      verb=f"{label} picks it")
            )  # fmt: skip
    return _Walk(family, weight_only, tuple(steps), tuple(order), entry,
                 known=entry is not None or not weight_only)  # fmt: skip


def _entry(evaluation: Evaluation) -> WeightOnly | None:
    """The release's weight-only kernels of the evaluation's family (None: not read)."""
    from fp4doctor.checkpoint import constraints

    return constraints.load().weight_only_backends(
        evaluation.profile.target,
        evaluation.engine.version,
        evaluation.family,
        evaluation.checkpoint_format,
    )


def _weight_only(evaluation: Evaluation, entry: WeightOnly) -> _Walk:
    """The release's weight-only branch of the linear family (shapes.yaml `weight_only`)."""
    profile, label = evaluation.profile, evaluation.engine_label
    ccs = {g.cc for g in evaluation.facts.gpus}
    # (VLLM_DISABLED_KERNELS is not read here: vLLM forces the weight-only kernel, which it
    # does not check against the list, except on SM90 from 0.32, where the registry walk that
    # prefers Humming reads it: not modelled.)
    steps: list[_Step] = []
    order: list[str] = []
    for step in _steps(entry):
        b = step.backend
        if b not in evaluation.verdicts or (
            step.compute_capability and not ccs <= set(step.compute_capability)
        ):
            continue
        if b in order:
            continue
        order.append(b)
        requires = profile.backends[b].requires
        if step.forced:
            verb = f"{label} forces it for weight-only layers"
            steps.append(_Step(b, runs=verb, verb=verb))
        elif conditions_hold(requires, evaluation.context):
            runs = f"the first of {label}'s weight-only kernels that runs here"
            steps.append(_Step(b, runs=runs, verb=f"{label} picks it"))
        else:
            why = _unmet(requires, evaluation, b)
            reason = why.reason if why else "not supported here"
            steps.append(_Step(b, Candidate(b, Status.SKIPPED, reason, why)))
    return _Walk(evaluation.family, True, tuple(steps), tuple(order), entry)


def _steps(entry: WeightOnly) -> tuple[PickStep, ...]:
    """The entry's `pick`; without one, its kernels in order, the first supported taken."""
    if entry.pick:
        return entry.pick
    from fp4doctor.checkpoint.constraints import PickStep

    return tuple(PickStep(b) for b in entry.backends)


def _disabled(listed: tuple[str, str]) -> str:
    variable, name = listed
    return f"{variable} lists {name}: disabled"


def _unmet(
    conditions: tuple[Requirement, ...], evaluation: Evaluation, backend: str
) -> Finding | None:
    """The first condition that does not hold here, as a finding (its reason says why)."""
    found = requirement_findings(conditions, evaluation.context, f"pick.{backend}", backend)
    return next((f for f in found if f.status.blocking), None)


def _decide(
    backend: str, own: Sequence[Finding], host: Sequence[Finding], runs: str, verb: str
) -> Candidate:
    """The engine takes `backend`: it runs, or fails on the layer, or cannot run here."""
    if own:
        return Candidate(
            backend, Status.FAILS, f"{verb}, and it fails on this layer: {own[0].reason}", own[0]
        )
    if host:
        return Candidate(
            backend, Status.FAILS, f"{verb}, but it cannot run here: {host[0].reason}", host[0]
        )
    return Candidate(backend, Status.PICKED, runs)
