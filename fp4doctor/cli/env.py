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
    help="Output format: bash, zsh, fish, sh, pwsh, dotenv, gha, json (an engine's flags are an "
    "array in zsh, fish and pwsh, so that `$FP4DOCTOR_VLLM_ARGS` gives one argument per flag).",
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
    try:
        settle(report, "nothing to export")
    except SystemExit as stop:
        if shell == "json":  # a JSON reader still gets JSON: the outcome, nothing to set
            from fp4doctor.doctor import Outcome
            from fp4doctor.emit.json import nothing

            outcome = next((o for o in Outcome if o.exit_code == stop.code), Outcome.NOT_READY)
            write(nothing(outcome.value), kind="json")
        raise
    chosen = settings([p.resolution for p in report.families])
    label, version = report.engine_label, report.engine.version
    exports, notes = exports_for(report.profile, chosen, label, shell)
    for n in notes:
        note(n)
    with user_errors():
        if shell == "dotenv":
            from fp4doctor.emit.config import dotenv_words

            dotenv_words(exports, report.profile, version, label)
        text = emit(shell, exports)
    if shell == "gha" and exports.unset:
        note(
            "$GITHUB_ENV cannot unset variables; make sure the workflow does not set: "
            + " ".join(exports.unset)
        )
    note(using(report))
    write(text, kind="json" if shell == "json" else "exact")
