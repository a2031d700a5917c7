"""`fp4doctor verify-log LOGFILE`: what an engine's log says it ran, against the prediction for
this host (or --facts), and the errors in it with their diagnosis (fp4doctor/logs)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from fp4doctor.console import EXIT_CODES_HELP, Command, UserError, flush_stdout, note, write
from fp4doctor.options import ask, question_options
from fp4doctor.terminal import clean

if TYPE_CHECKING:
    from fp4doctor.doctor import Question, Report
    from fp4doctor.findings import Finding
    from fp4doctor.logs.layers import Row
    from fp4doctor.logs.reading import Reading
    from fp4doctor.logs.verdict import Verdict


@click.command("verify-log", cls=Command, epilog=EXIT_CODES_HELP)
@click.argument("logfile", type=click.Path(dir_okay=False, allow_dash=True))
@question_options
@click.option(
    "--follow",
    is_flag=True,
    help="Read a log still being written (tail -f, from its first line): print the start-up "
    "verdict as soon as the kernel lines appear and the first error with its diagnosis; stop "
    "once the engine is up or has failed, or after --timeout.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.0, max=86400.0),
    default=None,
    metavar="SECONDS",
    help="With --follow: stop waiting after this long (default 900).",
)
def verify_log(q: Question, logfile: str, follow: bool, timeout: float | None) -> None:
    """Read an engine's log (a file, or '-' for stdin): the NVFP4 kernels it says ran against
    fp4doctor's prediction for this host (or --facts), and every error in it.

    Reads vLLM's `Using X for NVFP4 GEMM` and MoE backend lines and SGLang's server_args; every
    Python exception, CUDA, launch or NCCL error and assertion, one per distinct cause with a
    count, quoting the line and the traceback frame nearest an FP4 module; known errors
    (profiles/signatures.yaml) with their diagnosis and fix. Docker and Kubernetes timestamps,
    process and rank prefixes and ANSI codes are taken off. With vLLM's module tree
    (VLLM_LOG_MODEL_INSPECTION=1) and --model, what ran per layer class against `explain`.
    Exit 0 when the kernels agree and there is no error, 1 when not, 3 when the log names no
    kernel and no error (empty, binary, a WARNING-level log), 2 when it cannot be read.
    """
    import os

    from fp4doctor.logs import source
    from fp4doctor.logs.follow import DEFAULT_TIMEOUT, POLL, Follow
    from fp4doctor.logs.reading import Reading
    from fp4doctor.logs.signatures import shipped
    from fp4doctor.logs.verdict import judge

    if timeout is not None and not follow:
        raise UserError("--timeout is for --follow")
    try:
        fd = source.open_log(logfile)
    except source.LogUnreadable as exc:
        raise UserError(str(exc)) from None
    reading = Reading(shipped())
    # Following, the prediction comes first: the verdict is printed while the log grows.
    report = _prediction(q) if follow else None
    early = _Early(report) if follow else None
    stop = Follow(reading, DEFAULT_TIMEOUT if timeout is None else timeout) if follow else None
    try:
        for number, raw in source.lines(fd, reading.tally, follow=stop, poll=POLL):
            reading.feed_raw(number, raw)
            if early is not None:
                early.check(reading)
        reading.finish()
    except source.LogUnreadable as exc:
        raise UserError(f"{logfile}: {exc}") from None
    finally:
        if fd != 0:
            os.close(fd)
    verdict = judge(reading, report if follow else _prediction(q))
    shown = early.shown if early is not None else set()
    _show(verdict, skip=shown)
    sys.exit(verdict.exit_code)


class _Early:
    """--follow: the start-up verdict once every predicted family has its kernel line, and the
    first error with its diagnosis, printed as soon as they are read."""

    def __init__(self, report: Report | None) -> None:
        self.report = report
        self.shown: set[tuple[str, str]] = set()
        self._kernels_done = False
        self._errors = 0

    def check(self, reading: Reading) -> None:
        from fp4doctor.logs.verdict import judge

        families = {p.family for p in self.report.families} if self.report else set()
        ran = {r.family for r in reading.ran}
        kernels_now = not self._kernels_done and bool(ran) and families <= ran
        errors_now = len(reading.causes) > self._errors
        if not (kernels_now or errors_now):
            return
        verdict = judge(reading, self.report)
        fresh = [f for f in verdict.findings if (f.id, f.reason) not in self.shown]
        if kernels_now:
            self._kernels_done = True
            note(f"start-up verdict at log line {max(r.line for r in reading.ran)}:")
        if errors_now:
            self._errors = len(reading.causes)
        _show_findings([f for f in fresh if f.id != "log.none"], self.shown)


def _prediction(q: Question) -> Report | None:
    """fp4doctor's prediction for the host, None (with a note) where there is none: the errors
    are judged all the same."""
    from dataclasses import replace

    try:
        return ask(replace(q, smoke=False))
    except UserError as exc:
        note(f"no prediction to compare the kernels with ({exc.message}); the errors are judged")
        return None


def _lines(findings: list[Finding]) -> list[str]:
    from fp4doctor import render

    style = render.Style.for_stream(sys.stdout)
    lines = []
    for f in findings:
        lines.append(f"{style.mark(f.status)} {f.id}: {f.reason}")
        if f.fix and f.status.blocking:
            lines.append(f"    fix: {f.fix}")
        if f.source and f.status.blocking:
            lines.append(f"    source: {f.source}")
    return lines


def _show_findings(findings: list[Finding], shown: set[tuple[str, str]]) -> None:
    if not findings:
        return
    write(clean("\n".join(_lines(findings)) + "\n"))
    flush_stdout()
    shown.update((f.id, f.reason) for f in findings)


def _show(verdict: Verdict, skip: set[tuple[str, str]]) -> None:
    lines = _lines([f for f in verdict.findings if (f.id, f.reason) not in skip])
    if verdict.table:
        lines += ["", *table(verdict.table)]
    if lines:
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
