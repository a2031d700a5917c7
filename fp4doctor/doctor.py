"""The doctor core: a question in, an immutable report out. The command line, and anything that
runs the check without it (a node agent, a fleet), calls `diagnose`.

    report = diagnose(Question(target="vllm", prefer="cudnn"))
    report.outcome        # Outcome.READY / NOT_READY / NO_VERDICT
    report.resolution     # the backend chosen and the knob that selects it

probe (or a facts file) -> profile -> rules (static) -> live GEMMs -> rules (with them) -> resolve.
Nothing here exits the process or writes to stdout: progress goes to `progress`, and the
reasons a question cannot be answered are raised as `QuestionError` (bad input) or
`facts.FactsError` (unreadable facts).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fp4doctor import facts, profile
from fp4doctor.findings import Finding, matches
from fp4doctor.profile.model import Profile
from fp4doctor.resolve import Resolution, resolve
from fp4doctor.rules import Evaluation, evaluate, live
from fp4doctor.versions import is_version

if TYPE_CHECKING:  # the smoke package is imported only when live GEMMs run
    from fp4doctor.smoke.result import SmokeResult

ENGINE_TARGETS = (("vllm", "vllm"), ("sglang", "sglang"), ("tensorrt-llm", "trtllm"))
DEFAULT_TARGET = "vllm"


# Finding ids whose failures stand whatever backend is chosen.
_STANDING = ("host.", "engine.", "env.", "smoke.", "resolve.engine_auto")


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

    def ignore_ids(self) -> tuple[str, ...]:
        return tuple(p.strip() for v in self.ignore for p in v.split(",") if p.strip())


@dataclass(frozen=True)
class Report:
    """Everything one diagnosis found; the one place that says whether the host is ready."""

    question: Question
    evaluation: Evaluation
    resolution: Resolution
    smoke_note: str | None = None  # why the live GEMMs did not run, when they did not

    @property
    def outcome(self) -> Outcome:
        if self.evaluation.no_verdict:
            return Outcome.NO_VERDICT
        if self.resolution.ready and not self._blocking_outside_the_choice():
            return Outcome.READY
        return Outcome.NOT_READY

    @property
    def ready(self) -> bool:
        return self.outcome is Outcome.READY

    @property
    def env_makes_ready(self) -> bool:
        """Not ready only as the environment is set: `fp4doctor env` would make it ready (a
        valid choice exists, and what blocks is a variable or the engine's own pick)."""
        if self.outcome is not Outcome.NOT_READY or not self.resolution.ready:
            return False
        return all(
            f.id.startswith(("env.", "resolve.engine_auto"))
            for f in self._blocking_outside_the_choice()
        )

    def findings(self) -> list[Finding]:
        return self.evaluation.all_findings() + list(self.resolution.findings)

    def blocking(self) -> list[Finding]:
        """What stands in the way, for a one-line-each explanation."""
        if self.outcome is Outcome.NO_VERDICT:
            return [f for f in self.evaluation.host if f.status.blocking]
        chosen = [f for f in self.resolution.findings if f.status.blocking]
        return chosen + [f for f in self._blocking_outside_the_choice() if f not in chosen]

    def ignored_deciding(self) -> list[Finding]:
        """The failures --ignore downgraded that decide the answer: one that stands whatever
        the choice (the host, the engine, the environment), or one of the chosen backend's."""
        verdict = self.evaluation.verdicts.get(self.resolution.chosen or "")
        own = verdict.findings if verdict else ()
        return [f for f in (*self._standing(), *own) if f.ignored]

    def unmatched_ignores(self) -> list[str]:
        """The --ignore patterns that name no finding (a typo ignores nothing, in silence)."""
        ids = {f.id for f in self.findings()}
        return [p for p in self.question.ignore_ids() if not any(matches(i, p) for i in ids)]

    def _blocking_outside_the_choice(self) -> list[Finding]:
        """Failures that stand whatever backend is chosen (see `_standing`)."""
        return [f for f in self._standing() if f.status.blocking]

    def _standing(self) -> list[Finding]:
        """Findings about the host, what the engine itself needs, the environment as set, the CPU
        live run, and an engine that left alone picks a known-broken backend."""
        e = self.evaluation
        found = (*e.host, *e.env_findings, *e.smoke, *self.resolution.findings)
        return [f for f in found if f.id.startswith(_STANDING)]


Progress = Callable[[str], None]


def diagnose(question: Question, progress: Progress | None = None) -> Report:
    """Answer `question` for this host (or its facts file). Raises QuestionError for a question
    that cannot be asked, and facts.FactsError for a facts file that cannot be read."""
    say = progress or (lambda _message: None)
    if question.engine_version is not None and not is_version(question.engine_version):
        raise QuestionError(
            f"--engine-version {question.engine_version!r} is not a version (e.g. 0.15.1)"
        )
    host, prof = _host_and_profile(question)
    ignore = question.ignore_ids()
    static = evaluate(prof, host, override_version=question.engine_version, ignore=ignore)
    results, smoke_note = _live(question, static, say)
    evaluation = (
        evaluate(
            prof,
            host,
            override_version=question.engine_version,
            live_results=results,
            ignore=ignore,
        )
        if results
        else static
    )
    try:
        resolution = resolve(evaluation, prefer=question.prefer, require=question.require)
    except ValueError as exc:
        raise QuestionError(str(exc)) from None
    return Report(question, evaluation, resolution, smoke_note)


def _host_and_profile(question: Question) -> tuple[facts.HostFacts, Profile]:
    """The facts (probed, or read) and the target's profile; the probe looks up every package
    the profile reads."""
    overrides = [Path(p) for p in question.profiles]

    def load(target: str) -> Profile:
        try:
            return profile.load(target, overrides)
        except profile.ProfileError as exc:
            raise QuestionError(str(exc)) from None

    if question.facts_file:
        host = facts.load(question.facts_file)
        return host, load(question.target or pick_target(host))
    from fp4doctor.probe import probe_host, with_compiled_archs, with_packages
    from fp4doctor.profile.kinds.compiled_arch import modules_read

    if question.target:
        prof = load(question.target)
        return probe_host(packages=prof.packages(), modules=modules_read(prof)), prof
    host = probe_host()
    prof = load(pick_target(host))
    return with_compiled_archs(with_packages(host, prof.packages()), modules_read(prof)), prof


def pick_target(host: facts.HostFacts) -> str:
    """The engine installed (the first of vLLM, SGLang, TensorRT-LLM), else vLLM."""
    for package, name in ENGINE_TARGETS:
        if host.packages.version(package):
            return name
    return DEFAULT_TARGET


def _live(
    question: Question, static: Evaluation, say: Progress
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
    gpus = [g.index for g in static.facts.gpus]
    adapters = (
        live.adapters_to_run(static.profile, static.verdicts, question.force)
        if gpus
        else ["emulation"]
    )
    if not adapters:
        return [], "not run: no backend is eligible on this host (--force runs them anyway)"
    where = f"{len(gpus)} GPU(s)" if gpus else "the CPU (no GPU: fp4doctor's own pipeline only)"
    say(f"running {len(adapters)} live GEMM check(s) on {where}...")
    results = smoke.run_smoke(
        adapters, gpus, timeout_s=question.smoke_timeout, allow_jit=question.allow_jit
    )
    return list(results), None
