"""Command line: parse, call the pipeline, render, pick the exit code. Nothing else lives here.

Exit codes (a contract, see README):
  0  ready: a valid FP4 GEMM path exists and the environment as set does not break it
  1  not ready: the checks ran, and the required path is not valid
  2  usage or profile error
  3  no verdict could be reached (e.g. NVML cannot tell which GPUs exist)
  130  interrupted (Ctrl-C); no partial output
"""

from __future__ import annotations

import functools
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fp4doctor import __version__, facts

if TYPE_CHECKING:  # the pipeline is imported inside the commands: start-up stays fast
    from fp4doctor.emit import Exports
    from fp4doctor.resolve import Resolution
    from fp4doctor.rules import Evaluation

EXIT_READY, EXIT_NOT_READY, EXIT_USAGE, EXIT_NO_VERDICT = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it; click's own Abort would exit 1
ENGINE_TARGETS = (("vllm", "vllm"), ("sglang", "sglang"), ("tensorrt-llm", "trtllm"))
EXIT_CODES_HELP = """\b
Exit codes:
  0  ready: a valid FP4 GEMM path exists and the environment as set does not break it
  1  not ready: the checks ran and the required path is not valid
  2  usage or profile error
  3  no verdict could be reached (NVML cannot tell which GPUs exist, unreadable facts)
  130  interrupted (Ctrl-C)"""


class UserError(click.ClickException):
    """A user's mistake: printed as one line on stderr, exit code 2, no traceback."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"fp4doctor: error: {self.message}", err=True)


class NoVerdict(UserError):
    exit_code = EXIT_NO_VERDICT


@contextmanager
def user_errors() -> Iterator[None]:
    from fp4doctor.profile import ProfileError
    from fp4doctor.resolve import ResolveError

    try:
        yield
    except (ProfileError, ResolveError) as exc:
        raise UserError(str(exc)) from None
    except facts.FactsError as exc:
        raise NoVerdict(str(exc)) from None


def note(message: str) -> None:
    click.echo(f"fp4doctor: {message}", err=True)


class _Main(click.Group):
    """The top-level group: Ctrl-C ends any command with one line and exit code 130, not
    click's "Aborted!" and exit 1 (which a pipeline would read as "not ready")."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            note("interrupted")
            ctx.exit(EXIT_INTERRUPTED)


@click.group(
    cls=_Main, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES_HELP
)
@click.version_option(__version__, prog_name="fp4doctor")
def main() -> None:
    """Find which NVFP4 GEMM backend really works on this host, and how to switch it on.

    \b
      fp4doctor check                      the report: every backend on every GPU
      eval "$(fp4doctor env --prefer cudnn)"   switch the best valid path on
      fp4doctor config --target vllm -o vllm-fp4.yaml
    """


# --- shared options --------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """What `check`, `env` and `config` are asked: which engine, which host, which backend."""

    target: str | None
    profiles: tuple[str, ...]
    facts_file: str | None
    engine_version: str | None
    ignore: tuple[str, ...]
    prefer: str | None
    require: str | None


QUESTION_OPTIONS = (
    click.option(
        "--target",
        "-t",
        help="Engine: vllm, sglang, trtllm or flashinfer "
        "(default: the engine installed; vllm when none is).",
    ),
    click.option(
        "--profile",
        "profiles",
        multiple=True,
        type=click.Path(dir_okay=False),
        help="A profile YAML that adds or overrides a target (repeatable).",
    ),
    click.option(
        "--facts",
        "facts_file",
        type=click.Path(dir_okay=False),
        help="Judge this facts snapshot (from `fp4doctor probe --json`) instead of this host.",
    ),
    click.option(
        "--engine-version", help="Judge for this engine version instead of the installed one."
    ),
    click.option(
        "--ignore",
        multiple=True,
        metavar="IDS",
        help="Downgrade these finding ids (or id prefixes, comma-separated) to warnings.",
    ),
    click.option(
        "--prefer", help="Backend to prefer when valid (e.g. cudnn, trtllm, cutlass, marlin)."
    ),
    click.option(
        "--require",
        help="NAME, 'native' or 'any': exit 1 (and print or write nothing) unless it resolves.",
    ),
)


def question_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the shared options, and hand them to the command as one `question`."""

    @functools.wraps(command)
    def wrapper(**options: Any) -> None:
        fields = Question.__dataclass_fields__
        asked = Question(**{k: options.pop(k) for k in list(options) if k in fields})
        command(asked, **options)

    for option in reversed(QUESTION_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def load_facts(facts_file: str | None) -> facts.HostFacts:
    if facts_file:
        return facts.load(facts_file)
    from fp4doctor.probe import probe_host

    return probe_host()


def pick_target(host: facts.HostFacts, target: str | None) -> str:
    if target:
        return target
    for package, name in ENGINE_TARGETS:
        if host.packages.version(package):
            return name
    return "vllm"


def split_ids(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


def judge(q: Question) -> Evaluation:
    """Probe (or load the facts) and evaluate the target's profile: the static verdict."""
    from packaging.version import InvalidVersion, Version

    from fp4doctor import profile
    from fp4doctor.rules import evaluate

    if q.engine_version is not None:
        try:
            Version(q.engine_version)
        except InvalidVersion:
            raise UserError(
                f"--engine-version {q.engine_version!r} is not a version (e.g. 0.15.1)"
            ) from None
    host = load_facts(q.facts_file)
    prof = profile.load(pick_target(host, q.target), [Path(p) for p in q.profiles])
    return evaluate(prof, host, override_version=q.engine_version, ignore=split_ids(q.ignore))


def decide(q: Question, evaluation: Evaluation, nothing: str) -> Resolution:
    """Resolve for `env` and `config`: explain on stderr; exit 1 when nothing resolves, 3 when
    the host cannot be judged."""
    from fp4doctor.resolve import resolve
    from fp4doctor.rules import no_verdict

    if evaluation.engine.note:
        note(evaluation.engine.note)
    if no_verdict(evaluation):
        for f in evaluation.host:
            if f.status.blocking:
                note(f.reason)
        note(f"{nothing}: no verdict; run `fp4doctor check` for the full report")
        sys.exit(EXIT_NO_VERDICT)
    with user_errors():
        resolution = resolve(evaluation, prefer=q.prefer, require=q.require)
    for n in resolution.notes:
        note(n)
    if resolution.chosen is None or not resolution.ready:
        for f in resolution.findings:
            if f.status.blocking:
                note(f.reason)
        note(f"{nothing}; run `fp4doctor check` for the full report")
        sys.exit(EXIT_NOT_READY)
    return resolution


def readiness(evaluation: Evaluation, resolution: Resolution) -> tuple[bool, int]:
    from fp4doctor.rules import no_verdict

    if no_verdict(evaluation):
        return False, EXIT_NO_VERDICT
    blocking = [
        f for f in evaluation.host + evaluation.env_findings + evaluation.smoke if f.status.blocking
    ]
    ready = resolution.ready and not blocking
    return ready, EXIT_READY if ready else EXIT_NOT_READY


# --- probe ----------------------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
@click.option(
    "--redact/--no-redact",
    default=None,
    help="Strip UUIDs, hostname and home paths (default with --json).",
)
def probe(as_json: bool, redact: bool | None) -> None:
    """Print what this host has: GPUs, packages, cuDNN, toolchain, FP4 environment."""
    from fp4doctor import render
    from fp4doctor.probe import probe_host

    host = probe_host()
    if redact if redact is not None else as_json:
        host = facts.redact(host)
    sys.stdout.write(facts.dumps(host) if as_json else render.facts_text(host))


# --- check ----------------------------------------------------------------------------------


@main.command(epilog=EXIT_CODES_HELP)
@question_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Show every check, its id and its source.")
@click.option(
    "--smoke/--no-smoke",
    default=None,
    help="Run a live NVFP4 GEMM per eligible backend and GPU (default: when torch is installed).",
)
@click.option(
    "--smoke-timeout",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="Seconds one backend's live GEMM may take before its worker is killed.",
)
@click.option("--force", is_flag=True, help="Also run the live GEMM of backends the rules reject.")
@click.option(
    "--allow-jit",
    is_flag=True,
    help="Let FlashInfer compile or download kernels during the live GEMM (slow, network).",
)
def check(
    q: Question,
    as_json: bool,
    verbose: bool,
    smoke: bool | None,
    smoke_timeout: float,
    force: bool,
    allow_jit: bool,
) -> None:
    """Report every FP4 GEMM backend on every GPU: ✓ valid, ! warning, ✗ not valid, with fixes."""
    from fp4doctor import render
    from fp4doctor.resolve import resolve

    with user_errors():
        evaluation = judge(q)
        smoke_note = run_live(evaluation, smoke, q.facts_file, smoke_timeout, force, allow_jit)
        resolution = resolve(evaluation, prefer=q.prefer, require=q.require)
    ready, code = readiness(evaluation, resolution)
    if as_json:
        doc = render.document(evaluation, resolution, ready=ready, exit_code=code)
        if smoke_note:
            doc["smoke_note"] = smoke_note
        sys.stdout.write(render.dumps(doc))
    else:
        sys.stdout.write(
            render.human(
                evaluation,
                resolution,
                ready=ready,
                verbose=verbose,
                style=render.Style.for_stream(sys.stdout),
                smoke_note=smoke_note,
            )
        )
    sys.exit(code)


def run_live(
    evaluation: Evaluation,
    wanted: bool | None,
    facts_file: str | None,
    timeout: float,
    force: bool,
    allow_jit: bool,
) -> str | None:
    """Run the smoke GEMMs when asked (or by default when torch is there); return a note when
    they did not run."""
    from fp4doctor import smoke
    from fp4doctor.rules import live

    if wanted is False:
        return "not run (--no-smoke)"
    if facts_file:
        if wanted:
            note("--smoke is ignored with --facts: the live GEMM runs on this host only")
        return "not run: judging a facts snapshot, not this host"
    if not smoke.torch_available():
        return "not run: torch is not installed (pip install 'fp4doctor[smoke]')"
    gpus = [g.index for g in evaluation.facts.gpus]
    adapters = live.adapters_to_run(evaluation, force) if gpus else ["emulation"]
    if not adapters:
        return "not run: no backend is eligible on this host (--force runs them anyway)"
    where = f"{len(gpus)} GPU(s)" if gpus else "the CPU (no GPU: fp4doctor's own pipeline only)"
    note(f"running {len(adapters)} live GEMM check(s) on {where}...")
    results = smoke.run_smoke(adapters, gpus, timeout_s=timeout, allow_jit=allow_jit)
    live.merge(evaluation, results)
    return None


# --- env ------------------------------------------------------------------------------------


@main.command(epilog=EXIT_CODES_HELP)
@question_options
@click.option(
    "--shell",
    "shell",
    default="bash",
    show_default=True,
    help="Output format: bash, zsh, fish, sh, pwsh, dotenv, gha, json.",
)
@click.option("--smoke", is_flag=True, help="Also run the live GEMMs before choosing (slower).")
def env(q: Question, shell: str, smoke: bool) -> None:
    """Print the exports that switch the best valid FP4 GEMM path on, for `eval`.

    stdout carries only statements for the chosen shell; why, and any fallback, go to stderr.
    """
    from fp4doctor.emit import FORMATS, EmitError, emit

    if shell not in FORMATS:
        raise UserError(f"unknown --shell {shell!r} (valid: {', '.join(FORMATS)})")
    with user_errors():
        evaluation = judge(q)
        if smoke:
            run_live(evaluation, True, q.facts_file, 60.0, False, False)
    resolution = decide(q, evaluation, "nothing to export")
    exports = exports_for(evaluation, resolution)
    try:
        text = emit(shell, exports)
    except EmitError as exc:
        raise UserError(str(exc)) from None
    if shell == "gha" and exports.unset:
        note(
            "$GITHUB_ENV cannot unset variables; make sure the workflow does not set: "
            + " ".join(exports.unset)
        )
    note(f"{evaluation.engine_label}: using {resolution.chosen}")
    sys.stdout.write(text)


def exports_for(evaluation: Evaluation, resolution: Resolution) -> Exports:
    """The variables to set and unset; flags and arguments go into the args variable."""
    from fp4doctor.emit import Exports

    set_env = list(resolution.set_env)
    variable = evaluation.profile.engine.args_variable
    args = [f"{flag} {shlex.quote(value)}" for flag, value in resolution.cli_args]
    args += [f"{name}={value}" for name, value in resolution.arguments]
    if args and variable:
        set_env.append((variable, " ".join(args)))
        how = "a command-line flag" if resolution.cli_args else "an argument"
        note(
            f"{evaluation.engine_label} takes this choice only as {how}: "
            f"pass ${variable} to it ({' '.join(args)})"
        )
    if resolution.config:
        note(
            f"{evaluation.engine_label} takes this choice only in its options YAML: "
            f"write it with `fp4doctor config --target {evaluation.profile.target} -o FILE`"
        )
    names = {n for n, _ in set_env}
    return Exports(
        set=tuple(set_env), unset=tuple(n for n in resolution.unset_env if n not in names)
    )


# --- config ---------------------------------------------------------------------------------


@main.command(epilog=EXIT_CODES_HELP)
@question_options
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="File to write ('-' for stdout).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def config(q: Question, output: str, force: bool) -> None:
    """Write the choice as the engine's own config file (vLLM --config YAML, TensorRT-LLM
    options YAML) or, where the engine reads only variables, a dotenv file. Atomic."""
    from fp4doctor.atomic import write_atomic
    from fp4doctor.emit import EmitError, emit
    from fp4doctor.emit.config import render_trtllm_yaml, render_vllm_yaml

    with user_errors():
        evaluation = judge(q)
    resolution = decide(q, evaluation, "nothing to write")
    fmt = evaluation.profile.engine.config_format
    try:
        if resolution.config:
            text = render_trtllm_yaml({k: [v] for k, v in resolution.config})
        elif resolution.cli_args and fmt == "vllm-yaml":
            text = render_vllm_yaml(resolution.cli_args)
            if resolution.unset_env:
                note("also unset: " + " ".join(resolution.unset_env))
        else:
            if fmt != "dotenv":
                note(
                    f"{evaluation.engine_label} reads this choice from environment variables: "
                    "writing a dotenv file"
                )
            text = emit("dotenv", exports_for(evaluation, resolution))
    except EmitError as exc:
        raise UserError(str(exc)) from None
    if output == "-":
        sys.stdout.write(text)
        return
    try:
        write_atomic(Path(output), text, overwrite=force)
    except FileExistsError:
        raise UserError(f"{output} exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror or exc}") from None
    note(f"wrote {output} ({evaluation.engine_label}: {resolution.chosen})")


# --- profiles -------------------------------------------------------------------------------


@main.group()
def profiles() -> None:
    """List, show and validate profiles."""


@profiles.command("list")
def profiles_list() -> None:
    """List the shipped profiles."""
    from fp4doctor import profile

    with user_errors():
        for name in profile.builtin_names():
            p = profile.load(name)
            sys.stdout.write(
                f"{p.target:<11} {p.title:<13} {len(p.backends)} backends, "
                f"{len(p.eras)} eras, up to {p.title} {p.engine.newest_known}\n"
            )


@profiles.command("show")
@click.argument("name")
@click.option(
    "--profile",
    "extra",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A profile YAML that adds or overrides a target.",
)
def profiles_show(name: str, extra: tuple[str, ...]) -> None:
    """Show a profile as Markdown: what each backend needs and which knob selects it."""
    from fp4doctor import profile
    from fp4doctor.profile.markdown import render as markdown

    with user_errors():
        sys.stdout.write(markdown(profile.load(name, [Path(p) for p in extra])))


@profiles.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
def profiles_validate(paths: tuple[str, ...]) -> None:
    """Validate profile files; exit 2 with file, line and key on the first error."""
    from fp4doctor import profile

    with user_errors():
        for path in paths:
            p = profile.load_file(path)
            sys.stdout.write(
                f"{path}: ok ({p.target}: {len(p.backends)} backends, {len(p.eras)} eras)\n"
            )
