"""The doctor core: a question in, an immutable report out. The command line, and anything that
runs the check without it (a node agent, a fleet), calls `diagnose`.

    report = diagnose(Question(target="vllm", prefer="cudnn"))
    report.outcome        # Outcome.READY / NOT_READY / NO_VERDICT
    for part in report.families:   # the dense linear GEMM, the MoE experts: alike
        part.resolution   # the backend chosen and the knob that selects it

probe (or a facts file) -> profile -> rules (static) -> live GEMMs -> rules (with them) -> resolve.
Nothing here exits the process or writes to stdout: progress goes to `progress`, and the
reasons a question cannot be answered are raised as `QuestionError` (bad input) or
`facts.FactsError` (unreadable facts).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from fp4doctor import facts, profile
from fp4doctor.deployment import DeployedGemm, Deployment
from fp4doctor.facts import HostFacts
from fp4doctor.findings import Finding, matches
from fp4doctor.profile.model import (
    FAMILIES,
    FAMILIES_EVERY,
    FAMILY_LINEAR,
    FAMILY_TITLES,
    Profile,
)
from fp4doctor.rules import EngineVersion, Evaluation, engine_version, evaluate, live
from fp4doctor.selection import select
from fp4doctor.selection.choice import Resolution, ResolveError, meant_for
from fp4doctor.versions import is_version, not_a_version

if TYPE_CHECKING:  # the smoke package is imported only when live GEMMs run
    from fp4doctor.checkpoint import Checkpoint
    from fp4doctor.checkpoint.judge import ModelVerdict
    from fp4doctor.coldstart.verdict import ColdStart
    from fp4doctor.command import EngineCommand
    from fp4doctor.oracle.query import Asking
    from fp4doctor.settle import Stated
    from fp4doctor.smoke.result import SmokeResult
    from fp4doctor.smoke.runner import Prestarted

ENGINE_TARGETS = (("vllm", "vllm"), ("sglang", "sglang"), ("tensorrt-llm", "trtllm"))
DEFAULT_TARGET = "vllm"
DRIVER_GPUS = "/proc/driver/nvidia/gpus"  # the NVIDIA driver lists each GPU here


class QuestionError(ValueError):
    """The question cannot be asked as put (an unknown name, a malformed profile, a bad
    version); the message says what is valid."""


class Outcome(enum.Enum):
    """The answer, and the exit code that carries it (a contract: README, `--help`)."""

    READY = "ready"
    NOT_READY = "not ready"
    NO_VERDICT = "no verdict"

    @property
    def exit_code(self) -> int:
        return {"ready": 0, "not ready": 1, "no verdict": 3}[self.value]


@dataclass(frozen=True)
class Question:
    """What the doctor is asked: which engine, which host, which backend, how far to go."""

    target: str | None = None  # None: the engine installed (vllm when none is)
    profiles: tuple[str, ...] = ()  # the user's own profile files
    facts_file: str | None = None  # judge this snapshot instead of this host
    engine_version: str | None = None
    ignore: tuple[str, ...] = ()  # finding ids or prefixes, comma-separated allowed
    prefer: str | None = None
    require: str | None = None  # NAME, "native" or "any"
    smoke: bool | None = False  # live GEMMs: True, False, or None (when torch is installed)
    smoke_timeout: float = 60.0
    force: bool = False  # also run the live GEMMs of backends the rules reject
    allow_jit: bool = False
    family: str | None = None  # one FP4 GEMM family ("linear", "moe"); None: every one
    model: str | None = None  # a checkpoint (directory or cached ORG/NAME): judge its GEMMs
    tp: int | None = None  # tensor-parallel size the model is served at (None: not said, 1)
    ep: int | None = None  # expert-parallel size (MoE; None: not said, 1)
    hub: bool = False  # read the model's configs and headers from the Hub when not cached
    # What the deployment runs, for known bugs' triggers (None: not said).
    concurrency: int | None = None
    autotune: bool | None = None
    cuda_graphs: bool | None = None
    # `env --cold-start fast`: the exports carry the engine's knob that skips FlashInfer's
    # autotune, so unless --autotune says otherwise the tuned kernels' bugs are judged with it off.
    skip_autotune: bool = False
    strict: bool = False  # an unverified verdict (a release newer than the data) is not ready
    engine: bool = True  # ask the installed engine's own selection code (fp4doctor/oracle)
    # The engine's command line as the user will run it (`vllm serve MODEL --tp 4 ...`, after
    # `--`): the deployment judged as set (fp4doctor/command, fp4doctor/settle.py).
    command: tuple[str, ...] = ()

    def ignore_ids(self) -> tuple[str, ...]:
        return tuple(p.strip() for v in self.ignore for p in v.split(",") if p.strip())

    @property
    def tp_size(self) -> int:
        return self.tp or 1

    @property
    def ep_size(self) -> int:
        return self.ep or 1

    def stated(self) -> dict[str, Stated]:
        """The deployment fields fp4doctor's own options state (the command line's come first)."""
        from fp4doctor.settle import Stated

        out: dict[str, Stated] = {}
        for field, value, flag in (
            ("tp", self.tp, f"--tp {self.tp}"),
            ("ep", self.ep, f"--ep {self.ep}"),
            ("concurrency", self.concurrency, f"--concurrency {self.concurrency}"),
            ("autotune", self.autotune, f"--autotune {'on' if self.autotune else 'off'}"),
            ("cuda_graphs", self.cuda_graphs,
             f"--cuda-graphs {'on' if self.cuda_graphs else 'off'}"),
        ):  # fmt: skip
            if value is not None:
                out[field] = Stated(value, f"set by fp4doctor {flag}")
        return out


@dataclass(frozen=True)
class FamilyPart:
    """One FP4 GEMM family's verdicts, the engine's own pick and fp4doctor's choice (the dense
    linear GEMM, the MoE experts). Every family is judged, resolved and reported alike."""

    family: str
    evaluation: Evaluation
    resolution: Resolution
    # Whether the deployment is known to run this family: --family or --model names it, or the
    # engine runs every family a model has. A family not asked counts only when no family is.
    asked: bool = True
    cold_start: ColdStart | None = None  # what its first start-up compiles and tunes

    @property
    def title(self) -> str:
        return FAMILY_TITLES.get(self.family, self.family)

    @property
    def chosen(self) -> str | None:
        """The backend chosen, when one is valid and reachable here."""
        return self.resolution.chosen if self.resolution.ready else None

    def findings(self) -> list[Finding]:
        """This family's findings: its backends', its variables', its live runs', its choice's."""
        e = self.evaluation
        own = [f for v in e.verdicts.values() for f in v.findings]
        return [*own, *e.smoke, *e.env_findings, *self.resolution.findings]

    def standing(self) -> list[Finding]:
        """This family's findings that stand whatever backend is chosen: the variables as set,
        the CPU live run, an engine that left alone picks a backend that cannot run."""
        e = self.evaluation
        found = [*e.env_findings, *e.smoke, *self.resolution.findings]
        return [f for f in found if f.kind.stands]

    @property
    def ready(self) -> bool:
        """A valid choice, and nothing of this family's that blocks whatever the choice."""
        return self.chosen is not None and not any(f.status.blocking for f in self.standing())


@dataclass(frozen=True)
class Report:
    """Everything one diagnosis found; the one place that says whether the host is ready.

    `families` holds one equal part per FP4 GEMM family asked (`--family`, or every family the
    engine runs; with `--model`, those its NVFP4 layers use). `host` is what the host itself
    says, the same for every family. The outcome covers them all, and every consumer (check,
    env, config, node, fleet, the CI formats, the JSON document) reads it from here."""

    question: Question
    profile: Profile
    host: tuple[Finding, ...]
    families: tuple[FamilyPart, ...]
    smoke_note: str | None = None  # why the live GEMMs did not run, when they did not
    model: ModelVerdict | None = None  # with --model: each rank's GEMMs and their findings

    @property
    def facts(self) -> HostFacts:
        return self.families[0].evaluation.facts  # the same facts judged every family

    @property
    def engine(self) -> EngineVersion:
        return self.families[0].evaluation.engine  # one engine release for every family

    @property
    def engine_label(self) -> str:
        return f"{self.profile.title} {self.engine.version}"

    @property
    def counted(self) -> tuple[FamilyPart, ...]:
        """The families the verdict covers: those asked; when none is (a library used directly,
        neither --family nor --model given), those ready here, else all of them."""
        asked = tuple(p for p in self.families if p.asked)
        if asked:
            return asked
        return tuple(p for p in self.families if p.ready) or self.families

    def not_counted(self) -> tuple[FamilyPart, ...]:
        """The families left out of the verdict (not asked, and not ready here): a warning."""
        return tuple(p for p in self.families if p not in self.counted)

    @property
    def verified(self) -> bool:
        """False when a family's rules are extrapolated past the release data (Evaluation)."""
        return all(p.evaluation.verified for p in self.families)

    @property
    def outcome(self) -> Outcome:
        if any(p.evaluation.no_verdict for p in self.families):
            return Outcome.NO_VERDICT
        if self.question.strict and not self.verified:
            return Outcome.NOT_READY
        if all(p.ready for p in self.counted) and not self._blocking_outside_families():
            return Outcome.READY
        return Outcome.NOT_READY

    @property
    def ready(self) -> bool:
        return self.outcome is Outcome.READY

    @property
    def choices_valid(self) -> bool:
        """Every family counted has a valid backend to choose."""
        return all(p.chosen is not None for p in self.counted)

    @property
    def env_makes_ready(self) -> bool:
        """Not ready only as the environment is set: `fp4doctor env` would make it ready (every
        family has a valid choice, and what blocks is a variable or the engine's own pick)."""
        if self.outcome is not Outcome.NOT_READY or not self.choices_valid:
            return False
        if self.question.strict and not self.verified:
            return False  # no knob makes an unverified verdict verified
        return all(f.kind.env_fixes for f in self._blocking_outside_the_choice())

    @property
    def usable(self) -> bool:
        """What `env` and `config` may print: every family counted has a valid choice (their
        knobs select it; what else blocks, they say on stderr)."""
        return self.outcome is not Outcome.NO_VERDICT and self.choices_valid

    def family_ready(self, part: FamilyPart) -> bool:
        """Whether one family can run here: its own choice and findings, and nothing of the
        host's or the model's that blocks every family."""
        return part.ready and not self._blocking_outside_families()

    def blocking_families(self) -> list[FamilyPart]:
        """The families counted with no valid backend to choose, or that block as set."""
        return [p for p in self.counted if not self.family_ready(p)]

    def findings(self) -> list[Finding]:
        own = [f for p in self.families for f in p.findings()]
        return [*self.host, *own, *(self.model.findings if self.model else ())]

    def blocking(self) -> list[Finding]:
        """What stands in the way, for a one-line-each explanation."""
        if self.outcome is Outcome.NO_VERDICT:
            return [f for f in self.host if f.status.blocking]
        chosen = [f for p in self.counted for f in p.resolution.findings if f.status.blocking]
        return chosen + [f for f in self._blocking_outside_the_choice() if f not in chosen]

    def ignored_deciding(self) -> list[Finding]:
        """The failures --ignore downgraded that decide the answer: one that stands whatever
        the choice (the host, the engine, the environment), or one of the chosen backend's."""
        own = [
            f
            for p in self.families
            if (verdict := p.evaluation.verdicts.get(p.resolution.chosen or "")) is not None
            for f in verdict.findings
        ]
        return [f for f in (*self._standing(), *own) if f.ignored]

    def unmatched_ignores(self) -> list[str]:
        """The --ignore patterns that name no finding (a typo ignores nothing, in silence)."""
        found = self.findings()
        return [p for p in self.question.ignore_ids() if not any(matches(f, p) for f in found)]

    def _blocking_outside_families(self) -> list[Finding]:
        """Failures of the host and the model: they block every family."""
        model = self.model.findings if self.model else ()
        return [f for f in (*self.host, *model) if f.kind.stands and f.status.blocking]

    def _blocking_outside_the_choice(self) -> list[Finding]:
        """Failures that stand whatever backend is chosen (see `_standing`)."""
        return [f for f in self._standing() if f.status.blocking]

    def _standing(self) -> list[Finding]:
        """Findings about the host, what the engine itself needs, the model, and each family's
        variables as set, CPU live run and engine's own pick."""
        model = list(self.model.findings if self.model else ())
        found = [*self.host, *model, *(f for p in self.counted for f in p.standing())]
        return [f for f in found if f.kind.stands]


Progress = Callable[[str], None]


def diagnose(
    question: Question, progress: Progress | None = None, host: HostFacts | None = None
) -> Report:
    """Answer `question` for this host (or its facts file). Raises QuestionError for a question
    that cannot be asked, and facts.FactsError for a facts file that cannot be read.

    `host`: judge these facts, already read (a fleet judges each distinct snapshot once), as a
    snapshot is judged: no live GEMM runs."""
    if host is not None:
        question = replace(question, smoke=False)
    say = progress or (lambda _message: None)
    if question.engine_version is not None and not is_version(question.engine_version):
        raise QuestionError(not_a_version("--engine-version", question.engine_version))
    prestarted = _prestart(question)
    try:
        return _diagnose(question, say, prestarted, host)
    finally:
        if prestarted is not None:
            prestarted.close()


def _prestart(question: Question) -> Prestarted | None:
    """On a host with an NVIDIA GPU, when live GEMMs may run: a worker that imports torch (the
    seconds a live check costs) while the probe and the rules run. `run_smoke` gives it its
    GPU and adapters, or it is closed unused."""
    if question.smoke is False or question.facts_file:
        return None
    try:
        if not os.listdir(DRIVER_GPUS):
            return None
    except OSError:
        return None
    from fp4doctor import smoke

    if not smoke.torch_available():
        return None
    return smoke.Prestarted(allow_jit=question.allow_jit)


def _deployment(
    question: Question,
    ckpt: Checkpoint | None,
    prof: Profile,
    host: HostFacts,
    command: EngineCommand | None,
    options: dict[str, Stated],
) -> Deployment:
    """The deployment as it will run (fp4doctor/settle.py): what the engine's command line and
    fp4doctor's options state, else the engine release's defaults; the autotune off where
    `skip_autotune` writes the knob."""
    from fp4doctor.settle import settle, stated_by

    engine = engine_version(prof, host, question.engine_version)
    try:
        stated = stated_by(command, options)
    except ValueError as exc:
        raise QuestionError(str(exc)) from None
    return settle(
        target=prof.target,
        engine_version=engine.version,
        engine_label=f"{prof.title} {engine.version}",
        host=host,
        stated=stated,
        architectures=ckpt.architectures() if ckpt is not None else None,
        experts=ckpt.experts() if ckpt is not None else None,
        gemms=_deployed_gemms(question, ckpt),
        skip_autotune=question.skip_autotune,
    )


def _deployed_gemms(question: Question, ckpt: Checkpoint | None) -> tuple[DeployedGemm, ...] | None:
    """Every NVFP4 GEMM of the model as one rank runs it, for the triggers' shape arithmetic."""
    if ckpt is None:
        return None
    return tuple(
        DeployedGemm(g.layer.family, g.layer.scheme, g.n, g.k)
        for g in ckpt.gemms(question.tp_size, question.ep_size)
        if g.layer.fp4 and g.problem is None
    )


def _with_command_target(question: Question) -> Question:
    """The question with the target the engine's command line starts (`vllm serve` is vLLM);
    a --target that names another engine is a usage error."""
    if not question.command:
        return question
    from fp4doctor.command import CommandError
    from fp4doctor.command.launcher import recognise

    try:
        target = recognise(question.command).target
    except CommandError as exc:
        raise QuestionError(str(exc)) from None
    if question.target is not None and question.target != target:
        raise QuestionError(
            f"--target {question.target}: the command line starts {target}; drop --target "
            "or run the other engine's command"
        )
    return replace(question, target=target)


def _engine_command(question: Question, prof: Profile, host: HostFacts) -> EngineCommand | None:
    """The engine's command line read with the flags of the release judged (an unknown flag or
    value is the engine's own usage error, now)."""
    if not question.command:
        return None
    from fp4doctor.command import CommandError, parse

    engine = engine_version(prof, host, question.engine_version)
    environ = host.env if question.facts_file else os.environ
    try:
        return parse(question.command, release=engine.version, environ=environ)
    except CommandError as exc:
        raise QuestionError(str(exc)) from None


def _with_command(question: Question, command: EngineCommand) -> Question:
    """The question with the model the command line serves (unless --model names one) and the
    parallel sizes its per-rank shapes are read at: TP, and with expert parallelism each
    expert whole on a rank (EP = TP for the shapes; the EP size itself is settled apart)."""
    model = question.model if question.model is not None else command.model
    tp = question.tp if question.tp is not None else command.value("tp")
    ep = question.ep
    if ep is None and command.value("ep") is not None:
        ep = min(int(command.value("ep")), int(tp or 1))
    return replace(question, model=model, tp=tp, ep=ep)


def _readable_checkpoint(question: Question) -> tuple[Checkpoint | None, str | None]:
    """The model's checkpoint, or None and why, when it is named but cannot be read offline."""
    try:
        return _checkpoint(question), None
    except _Unread as exc:
        return None, f"{exc}: judged without the model's checkpoint"


def _engine_args(
    question: Question, prof: Profile, host: HostFacts, command: EngineCommand | None
) -> dict[str, str]:
    """The engine's flags as set: the command line's, then its args variable's
    (`FP4DOCTOR_VLLM_ARGS`, as `vllm serve MODEL $FP4DOCTOR_VLLM_ARGS` passes them): in this
    environment, or in the facts' when judging a snapshot. A backend flag the command line
    reader normalised (vLLM lower-cases and turns `-` into `_`) carries the engine's value."""
    import shlex

    from fp4doctor.settle import engine_flags

    words = list(question.command)
    variable = prof.engine.args_variable
    env = host.env if question.facts_file else os.environ
    if variable and env.get(variable):
        try:
            words += shlex.split(env[variable])
        except ValueError as exc:
            raise QuestionError(f"{variable}={env[variable]!r} cannot be split: {exc}") from None
    flags = engine_flags(words)
    for field in ("linear_backend", "moe_backend"):
        setting = command.settings.get(field) if command is not None else None
        if setting is None:
            continue
        flag = "--" + setting.flag.split()[0].partition("=")[0].lstrip("-").replace("_", "-")
        if flag in flags:
            flags[flag] = str(setting.value)
    return flags


def _diagnose(
    question: Question, say: Progress, prestarted: Prestarted | None, given: HostFacts | None
) -> Report:
    question = _with_command_target(question)  # the engine the command line starts
    options = question.stated()  # fp4doctor's own --tp/--ep/...: before the command fills them
    unread: str | None = None
    if not question.command:  # a bad --model is a usage error, before any probe
        ckpt, unread = _readable_checkpoint(question)
    host, prof = _host_and_profile(question, given)
    command = _engine_command(question, prof, host)
    if command is not None:
        question = _with_command(question, command)
        ckpt, unread = _readable_checkpoint(question)
    ignore = question.ignore_ids()
    families = _families(question, prof)
    if ckpt is not None:  # with a model: the families its NVFP4 layers use
        families = [f for f in families if f in ckpt.families()] or families
    deployment = _deployment(question, ckpt, prof, host, command, options)
    if unread is not None:
        deployment = replace(deployment, notes=(unread, *deployment.notes))
    if command is not None:
        deployment = replace(deployment, notes=(*command.notes, *deployment.notes))
    args = _engine_args(question, prof, host, command)
    env = {**host.env, **(command.environment if command is not None else {})}
    statics = [
        evaluate(
            prof,
            host,
            override_version=question.engine_version,
            ignore=ignore,
            family=f,
            deployment=deployment,
            args=args,
            env=env,
        )
        for f in families
    ]
    # In the background, during the live GEMMs; a snapshot (a facts file, or facts given) is
    # another host's: its GPUs are stubbed, and its engine must be the one installed here.
    snapshot = bool(question.facts_file) or given is not None
    asking = _ask_engine(question, statics, ckpt, snapshot)
    results, smoke_note = _live(question, statics, say, prestarted, _smoke_env(ckpt, question))
    answers = asking.answers() if asking is not None else None
    parts: list[FamilyPart] = []
    model: ModelVerdict | None = None
    for family, static in zip(families, statics, strict=True):
        own = live.owned(static.profile, results)
        evaluation = (
            evaluate(
                prof,
                host,
                override_version=question.engine_version,
                live_results=own,
                ignore=ignore,
                family=family,
                deployment=deployment,
                args=args,
                env=env,
            )
            if own
            else static
        )
        if ckpt is not None:
            model = model or _judge_model(question, ckpt, prof, evaluation)
        try:
            prefer = meant_for(prof, family, question.prefer, "--prefer")
            require = meant_for(prof, family, question.require, "--require")
            selected = select(evaluation, prefer=prefer, require=require, model=model,
                              answers=answers)  # fmt: skip
        except ResolveError as exc:  # a name no backend has: the user's; any other is a bug
            raise QuestionError(str(exc)) from None
        evaluation, resolution = selected.evaluation, selected.resolution
        if model is not None and selected.model_findings:
            model = model.with_findings(*selected.model_findings)
            model = model.with_ignores(question.ignore_ids())
        asked = _counted(question, prof, family, ckpt, named=prefer is not None or
                         require is not None)  # fmt: skip
        cold = _cold_start(question, evaluation, resolution)
        parts.append(FamilyPart(family, evaluation, resolution, asked, cold))
    host_findings = parts[0].evaluation.host  # judged once per family, the same each time
    return Report(question, prof, host_findings, tuple(parts), smoke_note, model)


def _counted(
    question: Question, prof: Profile, family: str, ckpt: Checkpoint | None, *, named: bool
) -> bool:
    """Whether the deployment is known to run `family`, so that it decides the verdict: named
    by --family, used by the model's layers, named by --prefer/--require; without a readable
    model, an engine runs the dense linear layers of any NVFP4 checkpoint, and the MoE experts
    when the model's name says it has routed experts. Any other family is assumed: judged and
    reported, not counted."""
    if question.family or ckpt is not None or named:
        return True
    if prof.engine.families != FAMILIES_EVERY:
        return False
    if family == FAMILY_LINEAR:
        return True
    from fp4doctor.settle import moe_by_name

    return question.model is not None and moe_by_name(question.model) is not None


def _ask_engine(
    question: Question, statics: list[Evaluation], ckpt: Checkpoint | None, snapshot: bool
) -> Asking | None:
    """The installed engine asked for its own picks (fp4doctor/oracle), per layer class of the
    model when one is given, or None (--no-engine, not installed, no GPU to ask for). Its
    capability query is stubbed for a facts file (another host's GPUs) and on a host without an
    NVIDIA driver."""
    if not question.engine:
        return None
    from fp4doctor.oracle import query

    weight_only: set[str] = set()  # the families with weight-only (W4A16) layers
    every_weight_only: set[str] = set()  # ... and those whose FP4 layers all are
    if ckpt is not None:
        from fp4doctor.checkpoint.layers import SCHEME_W4A16

        gemms = ckpt.gemms(question.tp_size, question.ep_size)
        for family in {g.layer.family for g in gemms if g.layer.fp4}:
            schemes = {g.layer.scheme for g in gemms if g.layer.fp4 and g.layer.family == family}
            if SCHEME_W4A16 in schemes:
                weight_only.add(family)
            if schemes == {SCHEME_W4A16}:
                every_weight_only.add(family)
    try:
        driver_gpus = bool(os.listdir(DRIVER_GPUS))
    except OSError:
        driver_gpus = False
    return query.start(
        statics,
        stub=snapshot or not driver_gpus,
        weight_only=weight_only,
        every_weight_only=every_weight_only,
        model=ckpt.config if ckpt is not None else None,
        model_format=ckpt.quant.format if ckpt is not None else None,
        facts=statics[0].facts if snapshot else None,
    )


def _cold_start(question: Question, evaluation: Evaluation, resolution: Resolution) -> ColdStart:
    """What the chosen backend's first start-up compiles and tunes (fp4doctor/coldstart/)."""
    from fp4doctor.coldstart.verdict import judge

    deployment = evaluation.context.deployment
    try:
        return judge(
            evaluation.facts,
            target=evaluation.profile.target,
            engine_version=evaluation.engine.version,
            family=evaluation.family,
            backend=resolution.chosen,
            ranks=deployment.tp or 1,
            # Off as the deployment is set; with `env --cold-start fast` the section shows what
            # the engine would tune, so that the knob turning it off is written.
            switched_off=deployment.origin("autotune")
            if deployment.autotune is False and not question.skip_autotune
            else None,
        )
    except profile.ProfileError as exc:
        raise QuestionError(str(exc)) from None


def _checkpoint(question: Question) -> Checkpoint | None:
    """The --model checkpoint, read (configs and safetensors headers only), or None."""
    if question.model is None:
        return None
    tp, ep = question.tp_size, question.ep_size
    if tp < 1 or ep < 1 or tp % ep:
        raise QuestionError(
            f"--tp {tp} --ep {ep}: both must be positive and EP must divide TP "
            "(the experts are split over EP ranks, each expert over TP/EP)"
        )
    from fp4doctor import checkpoint
    from fp4doctor.checkpoint.errors import NotHere

    try:
        return checkpoint.load(question.model, hub=question.hub)
    except NotHere as exc:  # named, not readable offline: the host is judged without it
        raise _Unread(str(exc)) from None
    except checkpoint.CheckpointError as exc:
        raise QuestionError(str(exc)) from None


class _Unread(Exception):
    """The model named cannot be read here (not cached, offline): said, and judged without."""


def _smoke_env(ckpt: Checkpoint | None, question: Question) -> dict[str, str] | None:
    """With a model: the workers' environment, carrying its per-rank linear GEMM shapes."""
    if ckpt is None:
        return None
    from fp4doctor.checkpoint import smoke as model_smoke

    nk = [(g.n, g.k) for g in ckpt.gemms(question.tp_size, question.ep_size)
          if g.layer.fp4 and g.layer.family == "linear" and g.problem is None]  # fmt: skip
    shapes = model_smoke.model_shapes(nk)
    return {**os.environ, model_smoke.SHAPES_ENV: model_smoke.encode(shapes)} if shapes else None


def _judge_model(
    question: Question, ckpt: Checkpoint, prof: Profile, evaluation: Evaluation
) -> ModelVerdict:
    """The model's findings for the engine release judged, --ignore applied."""
    from fp4doctor.checkpoint import constraints, judge

    try:
        rules = constraints.load()
    except profile.ProfileError as exc:
        raise QuestionError(str(exc)) from None
    verdict = judge.judge(
        ckpt, prof, evaluation.engine.version, rules, question.tp_size, question.ep_size
    )
    return verdict.with_ignores(question.ignore_ids())


def _families(question: Question, prof: Profile) -> list[str]:
    """The FP4 GEMM families to judge: the one `--family` names, else every one the engine runs."""
    present = prof.families()
    if question.family is None:
        return present
    if question.family not in present:
        valid = ", ".join(present) if question.family in FAMILIES else ", ".join(FAMILIES)
        raise QuestionError(
            f"--family {question.family!r}: {prof.title} profile has no such FP4 GEMM family "
            f"(valid: {valid})"
        )
    return [question.family]


def facts_for(question: Question) -> HostFacts:
    """The facts a diagnosis of `question` judges: its facts file read, else this host probed
    for every package its profile reads (`fleet --ray` gathers them so, and judges centrally)."""
    return _host_and_profile(question)[0]


def _host_and_profile(
    question: Question, given: HostFacts | None = None
) -> tuple[HostFacts, Profile]:
    """The facts (given, read or probed) and the target's profile; the probe looks up every
    package the profile reads."""
    overrides = [Path(p) for p in question.profiles]

    def load(target: str) -> Profile:
        try:
            return profile.load(target, overrides)
        except profile.ProfileError as exc:
            raise QuestionError(str(exc)) from None

    if given is None and question.facts_file:
        given = facts.load(question.facts_file)
    if given is not None:
        return given, load(question.target or pick_target(given.packages))
    from fp4doctor.probe import in_background, probe_host, with_compiled_archs, with_packages
    from fp4doctor.probe.packages import probe_packages
    from fp4doctor.profile.kinds.compiled_arch import modules_read

    # The probe (NVML, the cuDNN reader, nvcc, Triton's ptxas) runs while the profile is parsed:
    # neither needs the other until the profile's own packages and modules are looked up.
    probing = in_background(probe_host)
    engines = [package for package, _ in ENGINE_TARGETS]
    prof = load(question.target or pick_target(probe_packages(names=engines)))
    host = probing()
    return with_compiled_archs(with_packages(host, prof.packages()), modules_read(prof)), prof


def pick_target(packages: facts.PackageFacts) -> str:
    """The engine installed (the first of vLLM, SGLang, TensorRT-LLM), else vLLM."""
    for package, name in ENGINE_TARGETS:
        if packages.version(package):
            return name
    return DEFAULT_TARGET


def _live(
    question: Question,
    statics: list[Evaluation],
    say: Progress,
    prestarted: Prestarted | None = None,
    env: dict[str, str] | None = None,
) -> tuple[list[SmokeResult], str | None]:
    """Run the live GEMMs the question asks for; the results, or why none ran."""
    if question.smoke is False:
        return [], "not run (--no-smoke)"
    if question.facts_file:
        if question.smoke:
            say("--smoke is ignored with --facts: the live GEMM runs on this host only")
        return [], "not run: judging a facts snapshot, not this host"
    from fp4doctor import smoke  # here: `check --no-smoke` and `env` never load the smoke package

    if not smoke.torch_available():
        return [], "not run: torch is not installed (pip install 'fp4doctor[smoke]')"
    gpus = [g.index for g in statics[0].facts.gpus]
    if not gpus and question.smoke is None:
        # With no GPU only fp4doctor's own NVFP4 pipeline could run, on the CPU (~5 s of torch),
        # and no GPU is already "not ready" (or no verdict): that run cannot change the answer.
        return [], (
            "not run: no GPU here; the CPU run checks only fp4doctor's own NVFP4 pipeline and "
            "cannot change the verdict (--smoke runs it)"
        )
    adapters = (
        [a for s in statics for a in live.adapters_to_run(s.profile, s.verdicts, question.force)]
        if gpus
        else [live.CPU_ADAPTERS[s.family] for s in statics if s.family in live.CPU_ADAPTERS]
    )
    adapters = list(dict.fromkeys(adapters))
    if not adapters:
        return [], "not run: no backend is eligible on this host (--force runs them anyway)"
    where = f"{len(gpus)} GPU(s)" if gpus else "the CPU (no GPU: fp4doctor's own pipeline only)"
    say(f"running {len(adapters)} live GEMM check(s) on {where}...")
    results = smoke.run_smoke(
        adapters,
        gpus,
        timeout_s=question.smoke_timeout,
        allow_jit=question.allow_jit,
        prestarted=prestarted,
        env=env if gpus else None,  # the model's shapes are for GPUs, not the CPU pipeline run
    )
    return list(results), None
