"""The top-level command group. A command's module is imported when that command runs (or for
`--help`, which lists them all): `fp4doctor probe` never loads the rules, and no module of a
command imports another's."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import click

from fp4doctor import __version__, signals, startup
from fp4doctor.console import (
    EXIT_CODES_HELP,
    EXIT_READY,
    Command,
    HelpFits,
    Interrupted,
    OutputError,
    Suggests,
    discard_stdout,
    flush_stdout,
)

#: Each command's name, and the module (and attribute) that defines it.
COMMANDS = {
    "advisories": ("fp4doctor.cli.probe", "advisories"),
    "check": ("fp4doctor.cli.check", "check"),
    "config": ("fp4doctor.cli.config", "config"),
    "diff": ("fp4doctor.cli.diff", "diff"),
    "env": ("fp4doctor.cli.env", "env"),
    "explain": ("fp4doctor.cli.explain", "explain"),
    "fleet": ("fp4doctor.fleet.commands", "fleet"),
    "node": ("fp4doctor.fleet.commands", "node"),
    "prewarm": ("fp4doctor.cli.prewarm", "prewarm"),
    "probe": ("fp4doctor.cli.probe", "probe"),
    "profiles": ("fp4doctor.cli.profiles", "profiles"),
    "verify-log": ("fp4doctor.cli.verify_log", "verify_log"),
}


class _Main(HelpFits, Suggests):
    """The top-level group. Ctrl-C ends any command with one line and exit code 130, not
    click's "Aborted!" and exit 1 (which a pipeline would read as "not ready"); a write error on
    stdout with one line and exit code 4; stdout is flushed before the exit code is final."""

    command_class = Command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, *more: Any, **extra: Any
    ) -> Any:
        if not extra.get("standalone_mode", True):
            return super().main(args, *more, **extra)
        code: Any = EXIT_READY
        try:
            try:
                with signals.sigterm_interrupts():
                    super().main(args, *more, **extra)
            except SystemExit as exc:
                code = exc.code
            flush_stdout()
        except KeyboardInterrupt:
            (stop := Interrupted.now()).show()
            code = stop.exit_code
        except OutputError as exc:
            exc.show()
            discard_stdout()
            code = exc.exit_code
        startup.before_exit()
        sys.exit(code)

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        # Parsing writes --help and --version: a failure there is a write error too.
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            raise Interrupted.now() from None
        except OSError as exc:
            raise OutputError.of(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            (stop := Interrupted.now()).show()
            ctx.exit(stop.exit_code)


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
