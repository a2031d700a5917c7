"""`fp4doctor env`: the statements that switch the best valid path on, for `eval`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fp4doctor.console import EXIT_CODES_HELP, Command, UserError, note, user_errors, write
from fp4doctor.options import (
    ENGINE_COMMAND_HELP,
    ask,
    engine_command,
    question_options,
    settle,
    using,
)

if TYPE_CHECKING:
    from fp4doctor.doctor import Question, Report
    from fp4doctor.emit.exports import Exports


@click.command(cls=Command, epilog=f"{ENGINE_COMMAND_HELP}\n\n{EXIT_CODES_HELP}")
@engine_command
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
@click.option(
    "--cold-start",
    "cold_start",
    type=click.Choice(["fast", "persist"]),
    default=None,
    help="Also the knobs for a short first start-up: fast skips the engine's FlashInfer "
    "autotune, persist keeps its results (stderr says what each trades).",
)
@click.option(
    "--cache-dir",
    "cache_dir",
    default=None,
    metavar="DIR",
    help="With --cold-start: a persistent directory for FlashInfer's JIT builds (and, with "
    "persist, the autotune results).",
)
@click.option(
    "--log-kernels",
    "log_kernels",
    is_flag=True,
    help="Also the settings that make the engine's log name each NVFP4 kernel per layer class "
    "and why it skipped the others, for `verify-log` (vLLM: VLLM_LOGGING_LEVEL=DEBUG, "
    "VLLM_LOG_MODEL_INSPECTION=1; SGLang: --log-level info).",
)
def env(
    q: Question,
    shell: str,
    smoke: bool,
    cold_start: str | None,
    cache_dir: str | None,
    log_kernels: bool,
) -> None:
    """Print the exports that switch the best valid FP4 GEMM path on, for `eval`.

    stdout carries only statements for the chosen shell; why, and any fallback, go to stderr.
    """
    from dataclasses import replace

    from fp4doctor.emit import FORMATS, emit
    from fp4doctor.emit.knobs import exports_for, settings

    if shell not in FORMATS:
        raise UserError(f"unknown --shell {shell!r} (valid: {', '.join(FORMATS)})")
    report = ask(replace(q, smoke=smoke, skip_autotune=cold_start == "fast"))
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
    if cold_start is not None:
        exports, more = _cold_start(report, exports, cold_start, cache_dir)
        notes += more
    elif cache_dir is not None:
        raise UserError("--cache-dir is for --cold-start fast|persist")
    if log_kernels:
        from fp4doctor.emit.log_kernels import with_log_kernels

        exports, more = with_log_kernels(
            exports,
            target=report.profile.target,
            engine_version=version,
            args_variable=report.profile.engine.args_variable,
        )
        notes += more
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


def _cold_start(
    report: Report, exports: Exports, mode: str, cache_dir: str | None
) -> tuple[Exports, list[str]]:
    """`--cold-start`: the exports with the knobs for a short first start-up (coldstart/knobs)."""
    from fp4doctor.coldstart.knobs import with_cold_start

    tuned = [
        p.chosen
        for p in report.families
        if p.chosen and p.cold_start and p.cold_start.autotune.state in ("will-tune", "cached")
    ]
    with user_errors():
        return with_cold_start(
            exports,
            mode=mode,
            target=report.profile.target,
            engine_version=report.engine.version,
            label=report.engine_label,
            args_variable=report.profile.engine.args_variable,
            cache_dir=cache_dir,
            tuned=tuned,
        )
