"""`fp4doctor env`: the statements that switch the best valid path on, for `eval`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fp4doctor.cli.app import Command
from fp4doctor.cli.console import EXIT_CODES_HELP, UserError, note, user_errors, write
from fp4doctor.cli.options import ask, question_options, settle, using

if TYPE_CHECKING:
    from fp4doctor.doctor import Question


@click.command(cls=Command, epilog=EXIT_CODES_HELP)
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
