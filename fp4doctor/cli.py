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
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fp4doctor import __version__, facts

if TYPE_CHECKING:  # the core is imported inside the commands: start-up stays fast
    from fp4doctor.doctor import Question, Report

EXIT_READY, EXIT_NOT_READY, EXIT_USAGE, EXIT_NO_VERDICT = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it; click's own Abort would exit 1
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
    """The core's refusals as one line on stderr: 2 for a bad question, 3 for unreadable facts."""
    from fp4doctor.doctor import QuestionError
    from fp4doctor.emit import EmitError
    from fp4doctor.profile import ProfileError

    try:
        yield
    except (QuestionError, ProfileError, EmitError) as exc:
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
_QUESTION_FIELDS = ("target", "profiles", "facts_file", "engine_version", "ignore", "prefer",
                    "require")  # fmt: skip


def question_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the shared options, and hand them to the command as one `Question`."""
    from fp4doctor.doctor import Question

    @functools.wraps(command)
    def wrapper(**options: Any) -> None:
        asked = Question(**{k: options.pop(k) for k in _QUESTION_FIELDS})
        command(asked, **options)

    for option in reversed(QUESTION_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def ask(question: Question) -> Report:
    """Run the doctor core, its refusals as user errors and its progress on stderr."""
    from fp4doctor.doctor import diagnose

    with user_errors():
        return diagnose(question, progress=note)


def settle(report: Report, nothing: str) -> None:
    """For `env` and `config`: explain on stderr, and exit 1 when nothing is ready to use, 3 when
    the host cannot be judged."""
    from fp4doctor.doctor import Outcome

    evaluation, resolution = report.evaluation, report.resolution
    if evaluation.engine.note:
        note(evaluation.engine.note)
    if report.outcome is Outcome.NO_VERDICT:
        for f in report.blocking():
            note(f.reason)
        note(f"{nothing}: no verdict; run `fp4doctor check` for the full report")
        sys.exit(EXIT_NO_VERDICT)
    for n in resolution.notes:
        note(n)
    for f in resolution.findings:
        if f.id == "resolve.engine_auto" and f.status.blocking and resolution.ready:
            note(f"steering away: {f.reason}")
    if resolution.chosen is None or not resolution.ready:
        for f in report.blocking():
            note(f.reason)
        note(f"{nothing}; run `fp4doctor check` for the full report")
        sys.exit(EXIT_NOT_READY)


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


# --- advisories -----------------------------------------------------------------------------


@main.command()
@click.option(
    "--facts",
    "facts_file",
    type=click.Path(dir_okay=False),
    help="List what affects this facts snapshot instead of this host.",
)
@click.option("--json", "as_json", is_flag=True, help="Print them as JSON.")
def advisories(facts_file: str | None, as_json: bool) -> None:
    """List the known bugs (crash, wrong output, slow) that affect this host's packages and GPUs,
    for every engine and backend, MoE included. Exit 0 whatever is listed: `check` decides."""
    import json

    from fp4doctor import profile, render
    from fp4doctor.rules.advisories import affecting

    with user_errors():
        host = facts.load(facts_file) if facts_file else _probe()
        found = affecting(profile.known_issues(), host)
    if as_json:
        doc = [
            {
                "id": a.issue.id,
                "family": a.issue.family,
                "effect": a.issue.effect,
                "package": a.issue.package,
                "versions": str(a.issue.versions),
                "backends": list(a.issue.backends),
                "gpus": list(a.gpus),
                "reason": a.issue.reason,
                "fixed_in": a.issue.fixed_in,
                "workaround": a.issue.workaround,
                "source": a.issue.source,
            }
            for a in found
        ]
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return
    sys.stdout.write(render.advisories_text(found))


def _probe() -> facts.HostFacts:
    from fp4doctor.probe import probe_host

    return probe_host()


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
    from dataclasses import replace

    from fp4doctor import render

    report = ask(
        replace(q, smoke=smoke, smoke_timeout=smoke_timeout, force=force, allow_jit=allow_jit)
    )
    if as_json:
        sys.stdout.write(render.dumps(render.document(report)))
    else:
        style = render.Style.for_stream(sys.stdout)
        sys.stdout.write(render.human(report, verbose=verbose, style=style))
    sys.exit(report.outcome.exit_code)


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
    from dataclasses import replace

    from fp4doctor.emit import FORMATS, emit
    from fp4doctor.emit.knobs import exports_for

    if shell not in FORMATS:
        raise UserError(f"unknown --shell {shell!r} (valid: {', '.join(FORMATS)})")
    report = ask(replace(q, smoke=smoke))
    settle(report, "nothing to export")
    evaluation = report.evaluation
    exports, notes = exports_for(evaluation.profile, report.resolution, evaluation.engine_label)
    for n in notes:
        note(n)
    with user_errors():
        text = emit(shell, exports)
    if shell == "gha" and exports.unset:
        note(
            "$GITHUB_ENV cannot unset variables; make sure the workflow does not set: "
            + " ".join(exports.unset)
        )
    note(f"{evaluation.engine_label}: using {report.resolution.chosen}")
    sys.stdout.write(text)


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
    from fp4doctor.emit import emit
    from fp4doctor.emit.config import render_trtllm_yaml, render_vllm_yaml
    from fp4doctor.emit.knobs import exports_for

    report = ask(q)
    settle(report, "nothing to write")
    evaluation, resolution = report.evaluation, report.resolution
    fmt = evaluation.profile.engine.config_format
    with user_errors():
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
            exports, notes = exports_for(evaluation.profile, resolution, evaluation.engine_label)
            for n in notes:
                note(n)
            text = emit("dotenv", exports)
    if output == "-":
        sys.stdout.write(text)
        return
    try:
        write_atomic(output, text, overwrite=force)
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
