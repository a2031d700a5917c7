"""`fp4doctor verify-log LOGFILE`: what an engine's log says it ran, against the prediction for
this host (or --facts), and the errors in it with their diagnosis (fp4doctor/logs)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from fp4doctor.cli.app import Command
from fp4doctor.cli.console import EXIT_CODES_HELP, UserError, note, write
from fp4doctor.cli.options import ask, question_options
from fp4doctor.terminal import clean

if TYPE_CHECKING:
    from fp4doctor.doctor import Question, Report
    from fp4doctor.logs.layers import Row
    from fp4doctor.logs.verdict import Verdict


@click.command("verify-log", cls=Command, epilog=EXIT_CODES_HELP)
@click.argument("logfile", type=click.Path(dir_okay=False, allow_dash=True))
@question_options
def verify_log(q: Question, logfile: str) -> None:
    """Read an engine's log (a file, or '-' for stdin): the NVFP4 kernels it says ran against
    fp4doctor's prediction for this host (or --facts), and every error in it.

    Reads vLLM's `Using X for NVFP4 GEMM` and MoE backend lines and SGLang's server_args; every
    Python exception, CUDA, launch or NCCL error and assertion, one per distinct cause with a
    count, quoting the line and the traceback frame nearest an FP4 module; known errors
    (profiles/signatures.yaml) with their diagnosis and fix. Docker and Kubernetes timestamps,
    process and rank prefixes and ANSI codes are taken off. Exit 0 when the kernels agree and
    there is no error, 1 when not, 3 when the log names no kernel and no error (empty, binary,
    a WARNING-level log), 2 when it cannot be read.
    """
    from fp4doctor.logs import source
    from fp4doctor.logs.reading import Reading, read_lines
    from fp4doctor.logs.signatures import shipped
    from fp4doctor.logs.verdict import judge

    try:
        fd = source.open_log(logfile)
    except source.LogUnreadable as exc:
        raise UserError(str(exc)) from None
    reading = Reading(shipped())
    try:
        read_lines(source.lines(fd, reading.tally), reading)
    except source.LogUnreadable as exc:
        raise UserError(f"{logfile}: {exc}") from None
    finally:
        if fd != 0:
            import os

            os.close(fd)
    verdict = judge(reading, _prediction(q))
    _show(verdict)
    sys.exit(verdict.exit_code)


def _prediction(q: Question) -> Report | None:
    """fp4doctor's prediction for the host, None (with a note) where there is none: the errors
    are judged all the same."""
    from dataclasses import replace

    try:
        return ask(replace(q, smoke=False))
    except UserError as exc:
        note(f"no prediction to compare the kernels with ({exc.message}); the errors are judged")
        return None


def _show(verdict: Verdict) -> None:
    from fp4doctor import render

    style = render.Style.for_stream(sys.stdout)
    lines = []
    for f in verdict.findings:
        lines.append(f"{style.mark(f.status)} {f.id}: {f.reason}")
        if f.fix and f.status.blocking:
            lines.append(f"    fix: {f.fix}")
        if f.source and f.status.blocking:
            lines.append(f"    source: {f.source}")
    if verdict.table:
        lines += ["", *table(verdict.table)]
    write(clean("\n".join(lines) + "\n"))
    for n in verdict.notes:
        note(n)


def table(rows: list[Row]) -> list[str]:
    """Per layer class: the scheme, the kernel and the backends passed over, for people."""
    head = ("layer class", "family", "scheme", "modules", "kernel", "skipped")
    body = [
        (
            r.layer,
            r.family,
            r.scheme,
            str(r.modules or "-"),
            f"{r.kernel} ({r.backend})" if r.kernel and r.backend else (r.kernel or "-"),
            "; ".join(f"{b}: {why}" for b, why in r.skipped) or "-",
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in (head, *body)) for i in range(len(head) - 1)]
    out = ["what ran, per layer class:"]
    for cells in (head, *body):
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False))
                   + "  " + cells[-1])  # fmt: skip
    return out
