"""`fp4doctor check`: the report, in text, JSON or a CI format."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from fp4doctor.console import EXIT_CODES_HELP, Command, UserError, note, write
from fp4doctor.options import ENGINE_COMMAND_HELP, ask, engine_command, question_options
from fp4doctor.terminal import encoding_of

if TYPE_CHECKING:
    from fp4doctor.doctor import Question


CHECK_FORMATS = ("text", "json", "junit", "github")  # renderers: render.py, ci_formats.py


@click.command(cls=Command, epilog=f"{ENGINE_COMMAND_HELP}\n\n{EXIT_CODES_HELP}")
@engine_command
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
