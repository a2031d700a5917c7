"""stdout and stderr for the commands: the output as the stream can carry it, one line for
people on stderr, the user's errors as one line and their exit codes (a contract: README)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import click

from fp4doctor import facts, signals
from fp4doctor.terminal import ascii_json, clean, encoding_of, fit

EXIT_READY, EXIT_NOT_READY, EXIT_USAGE, EXIT_NO_VERDICT = 0, 1, 2, 3
EXIT_WRITE_FAILED = 4  # not 1: a full disk must not read as "not ready"
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it; click's own Abort would exit 1
EXIT_TERMINATED = 143  # 128 + SIGTERM, likewise
EXIT_CODES_HELP = """\b
Exit codes:
  0  ready as set: the kernel the engine will run per family can run here, no known bug
  1  not ready: as set it runs a kernel that cannot run (the fix is named), or no valid path
  2  usage or profile error
  3  no verdict could be reached (NVML cannot tell which GPUs exist, unreadable facts)
  4  could not write the output (a full disk, a closed stdout or pipe)
  130  interrupted (Ctrl-C); 143 terminated (SIGTERM)"""


class UserError(click.ClickException):
    """A user's mistake: printed as one line on stderr, exit code 2, no traceback."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        # One line whatever the message quotes (a --model holding a newline or an escape):
        # shown escaped, where click.echo would split the line or drop the escape.
        note("error: " + self.message.replace("\n", "\\n"))


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

    def __init__(self, what: str = "interrupted") -> None:
        super().__init__(what)

    def show(self, file: Any = None) -> None:
        note(self.message)

    @staticmethod
    def now() -> Interrupted:
        """Ctrl-C's, or SIGTERM's when that is what stopped the command (fp4doctor.signals)."""
        return Terminated() if signals.terminated() else Interrupted()


class Terminated(Interrupted):
    exit_code = EXIT_TERMINATED

    def __init__(self) -> None:
        super().__init__("terminated")


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
        if not carries(text, encoding):
            if kind == "json":
                text = ascii_json(text)
            elif kind == "text":
                text = fit(text, encoding)
            elif hasattr(stream, "buffer"):
                stream.flush()
                stream.buffer.write(text.encode("utf-8"))
                return
        stream.write(text)
    except (OSError, ValueError) as exc:  # ValueError: a closed file
        raise OutputError.of(exc) from None


def carries(text: str, encoding: str) -> bool:
    """Whether a stream in `encoding` can take `text` as it is."""
    if text.isascii() or encoding.startswith("utf"):
        return True
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def flush_stdout() -> None:
    """Flush now, inside the guarded region, so that nothing fails at interpreter shutdown."""
    stream = sys.stdout
    if stream is None:
        return
    try:
        stream.flush()
    except (OSError, ValueError) as exc:
        raise OutputError.of(exc) from None


def discard_stdout() -> None:
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
    text = fit(clean(f"fp4doctor: {message}"), encoding_of(sys.stderr))
    with suppress(OSError, ValueError):
        click.echo(text, err=True)


class HelpFits:
    """`--help` as stdout can carry it: click writes it as UTF-8 to an ASCII stream, and fails
    on a Latin-1 one."""

    def get_help(self, ctx: click.Context) -> str:
        text: str = super().get_help(ctx)  # type: ignore[misc]
        if carries(text, encoding := encoding_of(sys.stdout)):
            return text
        return fit(text, encoding)


class Command(HelpFits, click.Command):
    """Every command's class: `--help` that fits the stream, a bad value as one line."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        # A bad value (`--tp 0`) is one line, as every other user error; click's usage block
        # stays for what is about the command line's shape (an unknown option).
        try:
            return super().make_context(*args, **kwargs)
        except click.BadParameter as exc:
            raise UserError(exc.format_message().rstrip(".")) from None


class Suggests(click.Group):
    """An unknown subcommand is one user-error line with the closest name (exit 2), not click's
    three-line usage block."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        known = self.list_commands(ctx)
        if name and not name.startswith("-") and name not in known:
            from fp4doctor.suggest import did_you_mean

            raise UserError(
                f"no command {name!r}{did_you_mean(name, known)} (commands: {', '.join(known)})"
            )
        return super().resolve_command(ctx, args)


class Group(HelpFits, Suggests):
    """A group of commands under the top level (`profiles`)."""

    command_class = Command
