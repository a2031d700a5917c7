"""Command line: parse, call the pipeline, render, pick the exit code. Nothing else lives here.

Exit codes (a contract, see README):
  0  ready: a valid FP4 GEMM path exists and the environment as set does not break it
  1  not ready: the checks ran, and the required path is not valid
  2  usage or profile error
  3  no verdict could be reached (e.g. NVML cannot tell which GPUs exist)
  4  could not write the output (a full disk, a closed stdout or pipe); one line on stderr
  130  interrupted (Ctrl-C, also while starting up); one line on stderr, no partial output

Output fits the stream: where stdout or stderr cannot carry UTF-8 (a C or Latin-1 locale,
PYTHONIOENCODING=ascii) what it cannot carry is written in ASCII (`render.fit`), JSON as `\\u`
escapes; text from outside (facts, versions, environment values) reaches a terminal with its
control characters escaped (`render.clean`).
"""

from __future__ import annotations

import signal
import sys


def _interrupted_while_loading(signum: int, frame: object) -> None:
    # An exception raised here can land where Python ignores it (an import lock's callback):
    # exit at once instead; nothing has been written or started yet.
    import os

    sys.stderr.write("fp4doctor: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


# Ctrl-C while this module and its imports load (the console script imports it before it calls
# `main`): the one line and exit code 130 of any other interruption, not a traceback. Python's
# own handler is put back at the end of the module.
_SIGINT_BEFORE = signal.getsignal(signal.SIGINT)
if _SIGINT_BEFORE is signal.default_int_handler:
    try:
        signal.signal(signal.SIGINT, _interrupted_while_loading)
    except ValueError:  # imported outside the main thread: nothing to guard
        _SIGINT_BEFORE = None

# NVML starts in the driver while the modules below load, for a command that probes this host;
# the garbage collector is held off for the life of the command.
from fp4doctor import startup  # noqa: E402

startup.begin_nvml(sys.argv)
startup.hold_gc(sys.argv)

import codecs  # noqa: E402
import functools  # noqa: E402
import os  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager, suppress  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

import click  # noqa: E402

from fp4doctor import __version__, facts  # noqa: E402
from fp4doctor.findings import Kind  # noqa: E402

if TYPE_CHECKING:  # the core is imported inside the commands: start-up stays fast
    from fp4doctor.doctor import Question, Report

EXIT_READY, EXIT_NOT_READY, EXIT_USAGE, EXIT_NO_VERDICT = 0, 1, 2, 3
EXIT_WRITE_FAILED = 4  # not 1: a full disk must not read as "not ready"
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it; click's own Abort would exit 1
EXIT_CODES_HELP = """\b
Exit codes:
  0  ready: a valid FP4 GEMM path exists and the environment as set does not break it
  1  not ready: the checks ran and the required path is not valid
  2  usage or profile error
  3  no verdict could be reached (NVML cannot tell which GPUs exist, unreadable facts)
  4  could not write the output (a full disk, a closed stdout or pipe)
  130  interrupted (Ctrl-C)"""


class UserError(click.ClickException):
    """A user's mistake: printed as one line on stderr, exit code 2, no traceback."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"fp4doctor: error: {self.message}", err=True)


class NoVerdict(UserError):
    exit_code = EXIT_NO_VERDICT


class OutputError(UserError):
    """stdout cannot take the output (a full disk, a closed stdout or pipe): exit 4, so that a
    pipeline never reads a write error as "not ready"."""

    exit_code = EXIT_WRITE_FAILED

    @classmethod
    def of(cls, exc: BaseException | None) -> OutputError:
        if exc is None or "closed file" in str(exc):
            why = "stdout is closed"
        else:
            why = getattr(exc, "strerror", None) or str(exc)
        return cls(f"could not write the output: {why}")


class Interrupted(UserError):
    exit_code = EXIT_INTERRUPTED

    def __init__(self) -> None:
        super().__init__("interrupted")

    def show(self, file: Any = None) -> None:
        note("interrupted")


def encoding_of(stream: object) -> str:
    """The stream's encoding, normalised ("utf-8", "ascii", "iso8859-1"); ASCII for none."""
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name
    except LookupError:
        return "ascii"


def write(text: str, *, kind: str = "text") -> None:
    """A command's output on stdout, as the stream can carry it: `text` (for people) with what
    the encoding cannot carry in ASCII, `json` with \\u escapes where it cannot carry UTF-8,
    `exact` (statements, config files) unchanged, as UTF-8 bytes where the encoding cannot carry
    them. A stream that cannot be written raises OutputError (exit 4)."""
    stream = sys.stdout
    if stream is None:  # started with stdout closed (`>&-`)
        raise OutputError.of(None)
    encoding = encoding_of(stream)
    try:
        if not _carries(text, encoding):
            from fp4doctor import render

            if kind == "json":
                text = render.ascii_json(text)
            elif kind == "text":
                text = render.fit(text, encoding)
            elif hasattr(stream, "buffer"):
                stream.flush()
                stream.buffer.write(text.encode("utf-8"))
                return
        stream.write(text)
    except (OSError, ValueError) as exc:  # ValueError: a closed file
        raise OutputError.of(exc) from None


def _carries(text: str, encoding: str) -> bool:
    if text.isascii() or encoding.startswith("utf"):
        return True
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def _flush_stdout() -> None:
    """Flush now, inside the guarded region, so that nothing fails at interpreter shutdown."""
    stream = sys.stdout
    if stream is None:
        return
    try:
        stream.flush()
    except (OSError, ValueError) as exc:
        raise OutputError.of(exc) from None


def _discard_stdout() -> None:
    """After a write error: point stdout at /dev/null, so that the interpreter's own flush at exit
    finds nowhere to fail (and prints no second error)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # type: ignore[union-attr]
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


@contextmanager
def user_errors() -> Iterator[None]:
    """The core's refusals as one line on stderr: 2 for a bad question, 3 for unreadable facts."""
    from fp4doctor.doctor import QuestionError
    from fp4doctor.profile import ProfileError

    try:
        yield
    except (QuestionError, ProfileError) as exc:
        raise UserError(str(exc)) from None
    except facts.FactsError as exc:
        raise NoVerdict(str(exc)) from None
    except Exception as exc:
        # An EmitError comes only from the emitters, so it is looked for only where they were
        # loaded: `check` does not import them (and their `secrets`) for this clause.
        emit = sys.modules.get("fp4doctor.emit.exports")
        if emit is not None and isinstance(exc, emit.EmitError):
            raise UserError(str(exc)) from None
        raise


def note(message: str) -> None:
    """One line for people on stderr: control characters escaped, as the stream can carry it.
    stderr is best effort: failing to write it never changes the exit code."""
    from fp4doctor import render

    text = render.fit(render.clean(f"fp4doctor: {message}"), encoding_of(sys.stderr))
    with suppress(OSError, ValueError):
        click.echo(text, err=True)


class _HelpFits:
    """`--help` as stdout can carry it: click writes it as UTF-8 to an ASCII stream, and fails
    on a Latin-1 one."""

    def get_help(self, ctx: click.Context) -> str:
        text: str = super().get_help(ctx)  # type: ignore[misc]
        if _carries(text, encoding := encoding_of(sys.stdout)):
            return text
        from fp4doctor import render

        return render.fit(text, encoding)


class _Command(_HelpFits, click.Command):
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        # A bad value (`--tp 0`) is one line, as every other user error; click's usage block
        # stays for what is about the command line's shape (an unknown option).
        try:
            return super().make_context(*args, **kwargs)
        except click.BadParameter as exc:
            raise UserError(exc.format_message().rstrip(".")) from None


class _Main(_HelpFits, click.Group):
    """The top-level group. Ctrl-C ends any command with one line and exit code 130, not
    click's "Aborted!" and exit 1 (which a pipeline would read as "not ready"); a write error on
    stdout with one line and exit code 4; stdout is flushed before the exit code is final."""

    command_class = _Command
    group_class = type  # `profiles` is one of these too

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, *more: Any, **extra: Any
    ) -> Any:
        if not extra.get("standalone_mode", True):
            return super().main(args, *more, **extra)
        code: Any = EXIT_READY
        try:
            try:
                super().main(args, *more, **extra)
            except SystemExit as exc:
                code = exc.code
            _flush_stdout()
        except KeyboardInterrupt:
            note("interrupted")
            code = EXIT_INTERRUPTED
        except OutputError as exc:
            exc.show()
            _discard_stdout()
            code = exc.exit_code
        startup.before_exit()
        sys.exit(code)

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        # Parsing writes --help and --version: a failure there is a write error too.
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            raise Interrupted() from None
        except OSError as exc:
            raise OutputError.of(exc) from None

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
      fp4doctor check                                  the report, every backend
      x=$(fp4doctor env --prefer cudnn) && eval "$x"   switch the best path on
      fp4doctor config --target vllm -o vllm-fp4.yaml  the same as vLLM's config
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
    click.option(
        "--family",
        type=click.Choice(["linear", "moe"]),
        help="Judge one FP4 GEMM family only: the dense linear layers or the MoE experts "
        "(default: every family the engine runs). --prefer/--require apply to the family "
        "whose backend they name; write moe:NAME to say which.",
    ),
    click.option(
        "--model",
        metavar="PATH_OR_ID",
        help="Also judge this NVFP4 checkpoint's GEMMs (a directory, or ORG/NAME in the Hugging "
        "Face cache; configs and safetensors headers only).",
    ),
    click.option(
        "--tp",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Tensor-parallel size the model is served at (with --model).",
    ),
    click.option(
        "--ep",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Expert-parallel size (with --model; must divide --tp).",
    ),
    click.option(
        "--hub",
        is_flag=True,
        help="With --model ORG/NAME not in the cache: read its configs and headers from the Hub "
        "(needs pip install 'fp4doctor[hub]' and the network).",
    ),
)
_QUESTION_FIELDS = ("target", "profiles", "facts_file", "engine_version", "ignore", "prefer",
                    "require", "family", "model", "tp", "ep", "hub")  # fmt: skip


def question_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the shared options, and hand them to the command as one `Question`."""

    @functools.wraps(command)
    def wrapper(**options: Any) -> None:
        from fp4doctor.doctor import Question  # here, not at decoration: `probe` never needs it

        asked = Question(**{k: options.pop(k) for k in _QUESTION_FIELDS})
        command(asked, **options)

    for option in reversed(QUESTION_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def ask(question: Question) -> Report:
    """Run the doctor core, its refusals as user errors and its progress on stderr."""
    from fp4doctor.doctor import diagnose

    with user_errors():
        report = diagnose(question, progress=note)
    _unmatched_ignores(report)
    return report


def _unmatched_ignores(report: Report) -> None:
    for pattern in report.unmatched_ignores():
        note(
            f"--ignore {pattern}: no finding has this id or id prefix "
            "(`fp4doctor check -v` lists the ids); nothing was ignored for it"
        )


def settle(report: Report, nothing: str) -> None:
    """For `env` and `config`: explain on stderr, and exit 1 unless every family asked has a
    valid choice that the knobs make ready (naming the family that blocks), 3 when the host
    cannot be judged."""
    from fp4doctor.doctor import Outcome

    if report.engine.note:
        note(report.engine.note)
    if report.outcome is Outcome.NO_VERDICT:
        for f in report.blocking():
            note(f.reason)
        note(f"{nothing}: no verdict; run `fp4doctor check` for the full report")
        sys.exit(EXIT_NO_VERDICT)
    several = len(report.families) > 1
    for part in report.families:
        said = f"{part.title}: " if several else ""
        for n in part.resolution.notes:
            note(said + n)
        for f in part.resolution.findings:
            if f.kind is Kind.ENGINE_PICK and f.status.blocking and part.chosen is not None:
                note(f"{said}steering away: {f.reason}")
    if not report.usable:
        for part in report.families:
            if part.chosen is None:
                note(f"the {part.title} has no valid backend here")
        for f in report.blocking():
            note(f.reason)
        note(f"{nothing}; run `fp4doctor check` for the full report")
        sys.exit(EXIT_NOT_READY)
    for f in report.ignored_deciding():
        reason = f.reason.removesuffix(" (ignored)")
        note(f"--ignore changes the outcome: without it, this fails: {reason} [{f.id}]")


def using(report: Report) -> str:
    """`vLLM 0.15.1: using cutlass`, each family's choice named when there are several."""
    from fp4doctor.render import uses

    return f"{report.engine_label}: using {uses(report)}"


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
    host = _probe()
    if redact if redact is not None else as_json:
        host = facts.redact(host)
    if as_json:
        write(facts.dumps(host), kind="json")
        return
    from fp4doctor import render  # the text view only

    write(render.facts_text(host))


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
        write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", kind="json")
        return
    write(render.advisories_text(found))


def _probe() -> facts.HostFacts:
    from fp4doctor.probe import probe_host

    return probe_host()


# --- check ----------------------------------------------------------------------------------


CHECK_FORMATS = ("text", "json", "junit", "github")  # renderers: render.py, ci_formats.py


@main.command(epilog=EXIT_CODES_HELP)
@question_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(CHECK_FORMATS),
    default=None,
    help="text (default), json (versioned, fp4doctor/schemas), junit (one test case per "
    "check), github (workflow annotations, and the job summary in $GITHUB_STEP_SUMMARY).",
)
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@click.option("-v", "--verbose", is_flag=True, help="Show every check, its id and its source.")
@click.option(
    "--smoke/--no-smoke",
    default=None,
    help="Run a live NVFP4 GEMM per eligible backend and GPU (default: when torch is installed "
    "and a GPU is visible; without a GPU --smoke runs fp4doctor's own pipeline on the CPU).",
)
@click.option(
    "--smoke-timeout",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="Seconds one backend's live GEMMs may take before its worker is killed (start-up and "
    "the library's import have their own budget, 120 s).",
)
@click.option("--force", is_flag=True, help="Also run the live GEMM of backends the rules reject.")
@click.option(
    "--allow-jit",
    is_flag=True,
    help="Let FlashInfer compile or download kernels during the live GEMM (slow, network).",
)
def check(
    q: Question,
    fmt: str | None,
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

    if as_json and fmt not in (None, "json"):
        raise UserError(f"--json is --format json: it cannot go with --format {fmt}")
    fmt = "json" if as_json else (fmt or "text")
    report = ask(
        replace(q, smoke=smoke, smoke_timeout=smoke_timeout, force=force, allow_jit=allow_jit)
    )
    if fmt == "json":
        write(render.dumps(render.document(report)), kind="json")
    elif fmt == "junit":
        from fp4doctor import ci_formats

        write(ci_formats.junit(report), kind="exact")
    elif fmt == "github":
        from fp4doctor import ci_formats

        plain = render.Style(unicode=encoding_of(sys.stdout).startswith("utf"), color=False)
        write(ci_formats.github(report, render.human(report, verbose=verbose, style=plain)))
        if summary := os.environ.get("GITHUB_STEP_SUMMARY"):
            try:
                ci_formats.append_step_summary(summary, ci_formats.step_summary(report))
            except ci_formats.SummaryError as exc:
                note(str(exc))
    else:
        style = render.Style.for_stream(sys.stdout)
        write(render.human(report, verbose=verbose, style=style))
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
    from fp4doctor.emit.knobs import exports_for, settings

    if shell not in FORMATS:
        raise UserError(f"unknown --shell {shell!r} (valid: {', '.join(FORMATS)})")
    report = ask(replace(q, smoke=smoke))
    settle(report, "nothing to export")
    chosen = settings([p.resolution for p in report.families])
    exports, notes = exports_for(report.profile, chosen, report.engine_label)
    for n in notes:
        note(n)
    with user_errors():
        text = emit(shell, exports)
    if shell == "gha" and exports.unset:
        note(
            "$GITHUB_ENV cannot unset variables; make sure the workflow does not set: "
            + " ".join(exports.unset)
        )
    note(using(report))
    write(text, kind="json" if shell == "json" else "exact")


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
    from fp4doctor.emit.knobs import exports_for, settings

    report = ask(q)
    settle(report, "nothing to write")
    resolution = settings([p.resolution for p in report.families])
    label = report.engine_label
    fmt = report.profile.engine.config_format
    with user_errors():
        if resolution.config:
            text = render_trtllm_yaml(dict(resolution.options))
        elif resolution.cli_args and fmt == "vllm-yaml":
            text = render_vllm_yaml(resolution.cli_args)
            if resolution.unset_env:
                note("also unset: " + " ".join(resolution.unset_env))
        elif fmt != "dotenv" and not (resolution.set_env or resolution.arguments):
            # Nothing to set: still a file in the engine's own format (an empty mapping).
            text = render_vllm_yaml(()) if fmt == "vllm-yaml" else render_trtllm_yaml({})
            note(f"nothing to set for {label}: writing an empty config")
            if resolution.unset_env:
                note("also unset: " + " ".join(resolution.unset_env))
        else:
            if fmt != "dotenv":
                note(f"{label} reads this choice from environment variables: writing a dotenv file")
            exports, notes = exports_for(report.profile, resolution, label)
            for n in notes:
                note(n)
            text = emit("dotenv", exports)
    if output == "-":
        write(text, kind="exact")
        return
    try:
        write_atomic(output, text, overwrite=force)
    except FileExistsError:
        raise UserError(f"{output} exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror or exc}") from None
    note(f"wrote {output} ({using(report)})")


# --- profiles -------------------------------------------------------------------------------


@main.group()
def profiles() -> None:
    """List, show and validate profiles."""


@profiles.command("list")
def profiles_list() -> None:
    """List the shipped profiles."""
    from fp4doctor import profile

    with user_errors():
        loaded = [profile.load(name) for name in profile.builtin_names()]
    rows = [(p.target, p.title, f"{len(p.backends)} backends, {len(p.eras)} eras") for p in loaded]
    width = [max((len(row[i]) for row in rows), default=0) for i in range(3)]
    write(
        "".join(
            f"{t.ljust(width[0])}  {title.ljust(width[1])}  {counts.ljust(width[2])}  "
            f"up to {p.engine.newest_known}\n"
            for (t, title, counts), p in zip(rows, loaded, strict=True)
        )
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
        text = markdown(profile.load(name, [Path(p) for p in extra]))
    write(text)


@profiles.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
def profiles_validate(paths: tuple[str, ...]) -> None:
    """Validate profile files; exit 2 with file, line and key on the first error."""
    from fp4doctor import profile

    with user_errors():
        for path in paths:
            p = profile.load_file(path)
            write(f"{path}: ok ({p.target}: {len(p.backends)} backends, {len(p.eras)} eras)\n")


# --- explain --------------------------------------------------------------------------------


@main.command()
@question_options
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
def explain(q: Question, as_json: bool) -> None:
    """Per layer class of --model: the kernel this engine release picks, and why each earlier
    candidate was skipped (exit 0 once explained; 2 for a bad question or checkpoint)."""
    from dataclasses import replace

    from fp4doctor import render
    from fp4doctor.checkpoint import explain as explaining

    if q.model is None:
        raise UserError("explain needs --model PATH_OR_ID (and --tp N): the layers to explain")
    report = ask(replace(q, smoke=False))
    explanations = explaining.explain(report)
    if as_json:
        write(render.dumps(explaining.document(report, explanations)), kind="json")
    else:
        write(render.clean(explaining.text(report, explanations)))


def _loaded() -> None:
    """Put Python's own Ctrl-C handler back: from here on `main` turns Ctrl-C into exit 130."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_loading:
        signal.signal(signal.SIGINT, _SIGINT_BEFORE)


# `node` and `fleet` (issue 15): their module imports only click and the helpers above.
from fp4doctor.fleet.commands import commands as _fleet_commands  # noqa: E402

for _command in _fleet_commands():
    main.add_command(_command)

_loaded()
