"""`fp4doctor verify-log LOGFILE`: what an engine's start-up log says it ran, against the
prediction for this host (or --facts), and the known errors in it (fp4doctor/oracle/startup_log)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from fp4doctor.cli.app import Command
from fp4doctor.cli.console import EXIT_CODES_HELP, UserError, write
from fp4doctor.cli.options import ask, question_options
from fp4doctor.terminal import clean

if TYPE_CHECKING:
    from fp4doctor.doctor import Question


@click.command("verify-log", cls=Command, epilog=EXIT_CODES_HELP)
@click.argument("logfile", type=click.Path(dir_okay=False))
@question_options
def verify_log(q: Question, logfile: str) -> None:
    """Compare an engine's start-up log with fp4doctor's prediction for this host (or --facts).

    Reads the NVFP4 kernels the log says ran (vLLM's `Using X for NVFP4 GEMM` and MoE backend
    lines, SGLang's server_args) and the known errors (`no kernel image`, a refused backend, a
    libcudart loader error), each with its diagnosis and fix. Exit 0 when all agree, 1 when not.
    """
    from dataclasses import replace

    from fp4doctor import render
    from fp4doctor.oracle import startup_log

    try:
        with open(logfile, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as exc:
        raise UserError(f"{logfile}: cannot read the log: {exc.strerror or exc}") from None
    report = ask(replace(q, smoke=False))
    style = render.Style.for_stream(sys.stdout)
    found = startup_log.judge(text, report)
    lines = []
    for f in found:
        lines.append(f"{style.mark(f.status)} {f.id}: {f.reason}")
        if f.fix and f.status.blocking:
            lines.append(f"    fix: {f.fix}")
    write(clean("\n".join(lines) + "\n"))
    sys.exit(1 if any(f.status.blocking for f in found) else 0)
